/**
 * loadConfig: embedded defaults, environment variables, the YAML file, and the
 * messages of a bad configuration. Real files in temporary folders, no mocks.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig, requireMarketplaceSecrets, type Config } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { sentinelOptions } from '../../src/redis/sentinel-url.js';
import { buildRegistry } from '../../src/feeds/registry.js';
import { createMarketplaceAuth } from '../../src/keys/marketplace.js';
import { EXAMPLE_BOOKMAKERS, EXAMPLE_FILENAMES } from '../fixtures/corpus.js';

let cwd: string;

beforeEach(async () => {
  cwd = await mkdtemp(join(tmpdir(), 'oddsfiles-config-'));
});

afterEach(async () => {
  await rm(cwd, { recursive: true, force: true });
});

const load = (env: Record<string, string | undefined> = {}) => loadConfig({ env, cwd });

async function yaml(text: string, name = 'oddsfiles.yaml'): Promise<string> {
  const path = join(cwd, name);
  await mkdir(join(path, '..'), { recursive: true });
  await writeFile(path, text);
  return path;
}

/** The ConfigError loadConfig throws (fails the test when it throws nothing or something else). */
function configError(env: Record<string, string | undefined> = {}): ConfigError {
  try {
    load(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw new Error(`expected a ConfigError, got ${String(err)}`);
  }
  throw new Error('expected a ConfigError, the configuration loaded');
}

describe('embedded defaults', () => {
  it('with no environment and no file', () => {
    const c = load();
    const dataDir = join(cwd, 'var');
    expect(c.configFile).toBeUndefined();
    expect(c.dataDir).toBe(dataDir);
    expect(c.inboxDir).toBe(join(dataDir, 'inbox'));
    expect(c.rejectedDir).toBe(join(dataDir, 'rejected'));
    expect(c.storeUrl).toBe(pathToFileURL(join(dataDir, 'store')).href);
    expect(c.redis).toEqual({ url: 'redis://127.0.0.1:6379', explicit: false, prefix: 'oddsfiles', waitReplicas: 0, waitTimeoutMs: 2000 });
    expect(c.http).toEqual({ host: '127.0.0.1', port: 8080, tls: undefined });
    expect(c.adminToken).toBeUndefined();
    expect(c.logLevel).toBe('info');
    expect(c.s3).toEqual({ endpoint: undefined, forcePathStyle: false, region: undefined });
  });

  it('the example registry: seven bookmakers, three sports, 38 filenames', () => {
    const c = load();
    expect(c.bookmakers.map((b) => ({ ...b }))).toEqual(EXAMPLE_BOOKMAKERS.map((b) => ({ ...b })));
    expect(c.sports).toEqual(['soccer', 'basketball', 'tennis']);
    expect(buildRegistry(c.bookmakers, c.sports).filenames).toEqual([...EXAMPLE_FILENAMES].sort());
  });

  it('plans free and pro, no marketplaces', () => {
    const c = load();
    expect(Object.keys(c.plans).sort()).toEqual(['free', 'pro']);
    expect(c.plans.free).toEqual({ name: 'free', allow: ['site_pregame_*'], rate: { max: 30, perMs: 60_000 } });
    expect(c.plans.pro).toEqual({ name: 'pro', allow: ['*'], rate: { max: 600, perMs: 60_000 }, historyMs: 86_400_000 });
    expect(c.marketplaces).toEqual([]);
  });

  it('limits: 50 MiB, 5 minutes of future skew', () => {
    const c = load();
    expect(c.limits.maxFileBytes).toBe(52_428_800);
    expect(c.limits.futureSkewMs).toBe(300_000);
    expect(c.limits.maxDepth).toBeGreaterThanOrEqual(2);
  });

  it('reads the environment it is given, not process.env', () => {
    const before = process.env.PORT;
    process.env.PORT = '1234';
    try {
      expect(load().http.port).toBe(8080);
    } finally {
      if (before === undefined) delete process.env.PORT;
      else process.env.PORT = before;
    }
  });
});

describe('environment variables', () => {
  it('DATA_DIR moves every default folder, relative to the working folder', () => {
    const c = load({ DATA_DIR: 'data' });
    expect(c.dataDir).toBe(join(cwd, 'data'));
    expect(c.inboxDir).toBe(join(cwd, 'data', 'inbox'));
    expect(c.rejectedDir).toBe(join(cwd, 'data', 'rejected'));
    expect(c.storeUrl).toBe(pathToFileURL(join(cwd, 'data', 'store')).href);
    expect(load({ DATA_DIR: '/srv/odds' }).inboxDir).toBe('/srv/odds/inbox');
  });

  it('INBOX_DIR and REJECTED_DIR', () => {
    const c = load({ DATA_DIR: '/srv/odds', INBOX_DIR: 'drop', REJECTED_DIR: '/var/rejected' });
    expect(c.inboxDir).toBe(join(cwd, 'drop'));
    expect(c.rejectedDir).toBe('/var/rejected');
    expect(c.dataDir).toBe('/srv/odds');
  });

  it('STORE_URL: file URLs, paths and s3 URLs', () => {
    expect(load({ STORE_URL: 'file:///srv/store' }).storeUrl).toBe('file:///srv/store');
    expect(load({ STORE_URL: './published' }).storeUrl).toBe(pathToFileURL(join(cwd, 'published')).href);
    expect(load({ STORE_URL: '/srv/store' }).storeUrl).toBe('file:///srv/store');
    expect(load({ STORE_URL: 's3://odds-bucket/prod/files' }).storeUrl).toBe('s3://odds-bucket/prod/files');
    expect(load({ STORE_URL: 's3://odds-bucket' }).storeUrl).toBe('s3://odds-bucket');
  });

  it.each([['s3://Odds_Bucket/x'], ['http://example.com/store'], ['store'], ['file://relative/dir']])('STORE_URL=%s is refused, naming STORE_URL', (url) => {
    const err = configError({ STORE_URL: url });
    expect(err.file).toBeUndefined();
    expect(err.path).toBe('STORE_URL');
    expect(err.message).toMatch(/^environment: STORE_URL: /);
  });

  it('S3 settings', () => {
    const c = load({ S3_ENDPOINT: 'http://127.0.0.1:4569', S3_FORCE_PATH_STYLE: 'true', AWS_REGION: 'eu-west-1' });
    expect(c.s3).toEqual({ endpoint: 'http://127.0.0.1:4569', forcePathStyle: true, region: 'eu-west-1' });
    expect(load({ S3_FORCE_PATH_STYLE: 'false' }).s3.forcePathStyle).toBe(false);
  });

  it('REDIS_URL: explicit when set, database number kept', () => {
    expect(load({ REDIS_URL: 'redis://cache.internal:6380/3' }).redis).toEqual({
      url: 'redis://cache.internal:6380/3',
      explicit: true,
      prefix: 'oddsfiles',
      waitReplicas: 0,
      waitTimeoutMs: 2000,
    });
    expect(load({ REDIS_URL: '' }).redis.explicit).toBe(false);
  });

  it('REDIS_URL: a Sentinel group, checked at load', () => {
    const url = 'redis+sentinel://app:s%40cret@10.0.0.1:26379,10.0.0.2,[::1]:26380/odds?db=2';
    expect(load({ REDIS_URL: url }).redis.url).toBe(url);
    expect(sentinelOptions(url)).toMatchObject({
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: '10.0.0.2', port: 26379 },
        { host: '::1', port: 26380 },
      ],
      name: 'odds',
      db: 2,
      username: 'app',
      password: 's@cret',
    });
    expect(sentinelOptions('redis://127.0.0.1:6379')).toBeUndefined();
    for (const bad of ['redis+sentinel://h:1', 'redis+sentinel://h:x/odds', 'redis+sentinel://h:1/odds?db=x']) {
      expect(configError({ REDIS_URL: bad }).path, bad).toBe('REDIS_URL');
    }
  });

  it('REDIS_PREFIX', () => {
    expect(load({ REDIS_PREFIX: 'odds:staging' }).redis.prefix).toBe('odds:staging');
    const err = configError({ REDIS_PREFIX: 'has space' });
    expect(err.path).toBe('REDIS_PREFIX');
  });

  it('HOST and PORT', () => {
    const c = load({ HOST: '0.0.0.0', PORT: '9090' });
    expect(c.http.host).toBe('0.0.0.0');
    expect(c.http.port).toBe(9090);
    expect(load({ PORT: '' }).http.port).toBe(8080);
    expect(load({ PORT: '0' }).http.port).toBe(0);
  });

  it.each([['80a'], ['70000'], ['-1'], ['8080.5'], ['eighty']])('PORT=%s is refused', (port) => {
    const err = configError({ PORT: port });
    expect(err.path).toBe('PORT');
    expect(err.message).toContain(`"${port}"`);
  });

  it('TLS: both files give HTTPS, resolved against the working folder', () => {
    const c = load({ TLS_CERT_FILE: 'tls/cert.pem', TLS_KEY_FILE: '/etc/oddsfiles/key.pem' });
    expect(c.http.tls).toEqual({ certFile: join(cwd, 'tls/cert.pem'), keyFile: '/etc/oddsfiles/key.pem' });
  });

  it.each([
    [{ TLS_CERT_FILE: 'cert.pem' }, 'TLS_KEY_FILE'],
    [{ TLS_KEY_FILE: 'key.pem' }, 'TLS_CERT_FILE'],
  ])('TLS: one file without the other is refused (%j)', (env, missing) => {
    const err = configError(env);
    expect(err.path).toBe(missing);
    expect(err.message).toMatch(/both/);
  });

  it('ADMIN_TOKEN and LOG_LEVEL', () => {
    const c = load({ ADMIN_TOKEN: 'a-long-admin-token', LOG_LEVEL: 'debug' });
    expect(c.adminToken).toBe('a-long-admin-token');
    expect(c.logLevel).toBe('debug');
    expect(load({ ADMIN_TOKEN: '' }).adminToken).toBeUndefined();
    const err = configError({ LOG_LEVEL: 'verbose' });
    expect(err.path).toBe('LOG_LEVEL');
    expect(err.message).toContain('verbose');
  });
});

describe('the config file', () => {
  it('./oddsfiles.yaml in the working folder overrides parts; the rest keeps its defaults', async () => {
    const path = await yaml(['limits:', '  future_skew: 1m', 'sports: [soccer, darts]', 'ingest:', '  concurrency: 8', ''].join('\n'));
    const c = load();
    expect(c.configFile).toBe(path);
    expect(c.limits).toEqual({ maxFileBytes: 52_428_800, futureSkewMs: 60_000, maxDepth: expect.any(Number) });
    expect(c.sports).toEqual(['soccer', 'darts']);
    expect(c.ingest.concurrency).toBe(8);
    // Kernel events unless polling is asked for.
    expect(c.ingest.pollMs).toBe(0);
    expect(c.bookmakers).toHaveLength(7);
    expect(Object.keys(c.plans).sort()).toEqual(['free', 'pro']);
  });

  it('ingest.poll turns on polling of the inbox, at that period', async () => {
    await yaml('ingest: { poll: 750ms }\n');
    expect(load().ingest.pollMs).toBe(750);
  });

  it('ingest.sync_io_max_bytes: 256 KiB by default, 0 allowed, negative refused', async () => {
    expect(load().ingest.syncIoMaxBytes).toBe(262_144);
    await yaml('ingest: { sync_io_max_bytes: 0 }\n');
    expect(load().ingest.syncIoMaxBytes).toBe(0);
    await yaml('ingest: { sync_io_max_bytes: -1 }\n');
    expect(configError().message).toContain('sync_io_max_bytes');
  });

  it('ingest.carry_max_bytes: 0 by default on a filesystem store, 256 KiB on S3; a set value wins on either', async () => {
    expect(load().ingest.carryMaxBytes).toBe(0);
    expect(load({ STORE_URL: '/srv/store' }).ingest.carryMaxBytes).toBe(0);
    expect(load({ STORE_URL: 's3://odds-bucket/prod' }).ingest.carryMaxBytes).toBe(262_144);
    await yaml('ingest: { carry_max_bytes: 65536 }\n');
    expect(load().ingest.carryMaxBytes).toBe(65_536);
    expect(load({ STORE_URL: 's3://odds-bucket/prod' }).ingest.carryMaxBytes).toBe(65_536);
    await yaml('ingest: { carry_max_bytes: 0 }\n');
    expect(load({ STORE_URL: 's3://odds-bucket/prod' }).ingest.carryMaxBytes).toBe(0);
  });

  it('reader.request_log: all by default, errors and off allowed, anything else refused; merged with the other reader settings', async () => {
    expect(load().reader.requestLog).toBe('all');
    await yaml('reader: { request_log: errors }\n');
    const c = load();
    expect(c.reader.requestLog).toBe('errors');
    expect(c.reader.refreshMs).toBe(30_000);
    await yaml('reader: { request_log: off }\n');
    expect(load().reader.requestLog).toBe('off');
    await yaml('reader: { request_log: sometimes }\n');
    expect(configError().message).toContain('request_log');
  });

  it('ODDSFILES_CONFIG names the file (relative to the working folder) and wins over ./oddsfiles.yaml', async () => {
    await yaml('limits: { future_skew: 1m }\n');
    const path = await yaml('limits: { future_skew: 10s }\n', 'etc/odds.yaml');
    const c = load({ ODDSFILES_CONFIG: 'etc/odds.yaml' });
    expect(c.configFile).toBe(path);
    expect(c.limits.futureSkewMs).toBe(10_000);
    expect(load({ ODDSFILES_CONFIG: path }).configFile).toBe(path);
  });

  it('ODDSFILES_CONFIG naming a missing file is an error naming it', () => {
    const err = configError({ ODDSFILES_CONFIG: 'nowhere.yaml' });
    expect(err.file).toBe(join(cwd, 'nowhere.yaml'));
    expect(err.message).toContain(join(cwd, 'nowhere.yaml'));
    expect(err.message).toMatch(/not found/);
  });

  it('an empty file, or one of comments only, changes nothing', async () => {
    await yaml('# nothing here yet\n');
    const c = load();
    expect(c.limits.maxFileBytes).toBe(52_428_800);
    expect(c.bookmakers).toHaveLength(7);
  });

  it('bookmakers and plans replace the defaults whole', async () => {
    await yaml(
      [
        'bookmakers:',
        '  - { key: acme, name: ACME Bets, feeds: combined-live }',
        'plans:',
        '  basic: { allow: ["site_pregame_*", "site_live_acme.json"], rate: { max: 10, per: 30s } }',
        '  unlimited: { allow: ["*"] }',
        '',
      ].join('\n'),
    );
    const c = load();
    expect(c.bookmakers).toEqual([{ key: 'acme', name: 'ACME Bets', feeds: 'combined-live' }]);
    expect(c.plans).toEqual({
      basic: { name: 'basic', allow: ['site_pregame_*', 'site_live_acme.json'], rate: { max: 10, perMs: 30_000 } },
      unlimited: { name: 'unlimited', allow: ['*'], rate: undefined },
    });
  });

  it('a file does not change the defaults of the next load', async () => {
    await yaml('limits: { max_file_bytes: 1000 }\nreader: { refresh: 1s }\n');
    expect(load().limits.maxFileBytes).toBe(1000);
    await rm(join(cwd, 'oddsfiles.yaml'));
    const c = load();
    expect(c.limits.maxFileBytes).toBe(52_428_800);
    expect(c.reader.refreshMs).toBe(30_000);
  });

  it('marketplaces with secret_env and with secret', async () => {
    await yaml(
      [
        'marketplaces:',
        '  - name: rapidapi',
        '    secret_header: X-RapidAPI-Proxy-Secret',
        '    secret_env: RAPIDAPI_PROXY_SECRET',
        '    user_header: X-RapidAPI-User',
        '    plan_header: X-RapidAPI-Subscription',
        '    plans: { BASIC: free, PRO: pro, ULTRA: pro, MEGA: pro }',
        '  - name: other-market',
        '    secret_header: X-Proxy-Secret',
        '    secret: "literal-secret-123"',
        '    user_header: X-User',
        '    plan_header: X-Plan',
        '    plans: { starter: free }',
        '',
      ].join('\n'),
    );
    const c = load({ RAPIDAPI_PROXY_SECRET: 'from-the-environment' });
    expect(c.marketplaces).toEqual([
      {
        name: 'rapidapi',
        secretHeader: 'x-rapidapi-proxy-secret',
        secret: 'from-the-environment',
        userHeader: 'x-rapidapi-user',
        planHeader: 'x-rapidapi-subscription',
        plans: { BASIC: 'free', PRO: 'pro', ULTRA: 'pro', MEGA: 'pro' },
      },
      {
        name: 'other-market',
        secretHeader: 'x-proxy-secret',
        secret: 'literal-secret-123',
        userHeader: 'x-user',
        planHeader: 'x-plan',
        plans: { starter: 'free' },
      },
    ]);
  });

  it('a __proto__ key in the file does not pollute Object.prototype', async () => {
    await yaml('__proto__: { polluted: true }\n');
    try {
      load();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
    }
    expect(Object.prototype).not.toHaveProperty('polluted');
  });
});

describe('a bad config file names the file, the path inside it and the problem', () => {
  const market = (extra: string[], plans = '{ BASIC: free }') => [
    'marketplaces:',
    '  - name: rapidapi',
    '    secret_header: X-RapidAPI-Proxy-Secret',
    ...extra.map((l) => `    ${l}`),
    '    user_header: X-RapidAPI-User',
    '    plan_header: X-RapidAPI-Subscription',
    `    plans: ${plans}`,
    '',
  ];

  const cases: [string, string[], string | RegExp, RegExp, Record<string, string>?][] = [
    ['unknown setting at the top', ['colour: blue'], '', /unknown setting "colour"/],
    ['unknown setting in a section', ['limits:', '  max_file_bytes: 1000', '  max_files: 3'], 'limits', /unknown setting "max_files"/],
    ['unknown setting in a bookmaker', ['bookmakers:', '  - { key: a, name: A, feeds: split, colour: red }'], 'bookmakers[0]', /unknown setting "colour"/],
    ['bad duration', ['limits:', '  future_skew: 5 minutes'], 'limits.future_skew', /duration/],
    ['bad duration in a plan', ['plans:', '  free: { allow: ["*"], rate: { max: 1, per: soon } }'], 'plans.free.rate.per', /duration/],
    ['wrong type: text for a number', ['limits:', '  max_file_bytes: big'], 'limits.max_file_bytes', /integer/],
    ['wrong type: text for a list', ['sports: soccer'], 'sports', /array/],
    ['wrong type: a number for a section', ['ingest: 4'], 'ingest', /object/],
    ['unknown feed family', ['bookmakers:', '  - { key: a, name: A, feeds: weekly }'], 'bookmakers[0].feeds', /split.*combined-live.*livepre/],
    ['bookmaker key unusable in filenames', ['bookmakers:', '  - { key: north_wind, name: A, feeds: split }'], 'bookmakers[0].key', /pattern/],
    ['YAML syntax error', ['plans:', '  free:', '    allow: ["*"]', '   rate: 1'], /^line 4, column \d+$/, /./],
    ['YAML: unclosed flow sequence', ['sports: [soccer, tennis', 'limits: {}'], /^line \d+, column \d+$/, /./],
    ['YAML: duplicate key', ['sports: [soccer]', 'sports: [tennis]'], /^line 2, column \d+$/, /unique/],
    ['top level is not a mapping', ['- soccer', '- tennis'], '', /mapping/],
    [
      'duplicate bookmaker key',
      [
        'bookmakers:',
        '  - { key: northwind, name: A, feeds: split }',
        '  - { key: bluewater, name: B, feeds: split }',
        '  - { key: northwind, name: C, feeds: livepre }',
      ],
      'bookmakers[2].key',
      /duplicate bookmaker key "northwind"/,
    ],
    [
      'unknown plan in a marketplace map',
      market(['secret: "0123456789"'], '{ BASIC: free, ULTRA: platinum }'),
      'marketplaces[0].plans.ULTRA',
      /no plan named "platinum"/,
    ],
    ['missing secret env', market(['secret_env: RAPIDAPI_PROXY_SECRET']), 'marketplaces[0].secret_env', /RAPIDAPI_PROXY_SECRET is not set/],
    [
      'empty secret env',
      market(['secret_env: RAPIDAPI_PROXY_SECRET']),
      'marketplaces[0].secret_env',
      /RAPIDAPI_PROXY_SECRET is not set/,
      { RAPIDAPI_PROXY_SECRET: '' },
    ],
    ['neither secret nor secret_env', market([]), 'marketplaces[0]', /secret or secret_env/],
    [
      'both secret and secret_env',
      market(['secret: "0123456789"', 'secret_env: RAPIDAPI_PROXY_SECRET']),
      'marketplaces[0]',
      /not both/,
      { RAPIDAPI_PROXY_SECRET: 'x' },
    ],
  ];

  it.each(cases)('%s', async (_label, lines, path, problem, env = {}) => {
    const file = await yaml(lines.join('\n'));
    const err = configError(env);
    expect(err.file).toBe(file);
    expect(err.code).toBe('config.invalid');
    if (typeof path === 'string') expect(err.path).toBe(path);
    else expect(err.path).toMatch(path);
    expect(err.message.startsWith(`${file}: ${err.path || '(root)'}: `)).toBe(true);
    expect(err.message.slice(`${file}: ${err.path || '(root)'}: `.length)).toMatch(problem);
  });

  it('the YAML error message does not repeat its position', async () => {
    await yaml('sports: [soccer]\nsports: [tennis]\n');
    const err = configError();
    expect(err.message).not.toMatch(/at line \d+, column \d+/);
    expect(err.message).not.toMatch(/:\s*$/);
  });

  it('the same file with the secret set loads', async () => {
    await yaml(market(['secret_env: RAPIDAPI_PROXY_SECRET']).join('\n'));
    expect(load({ RAPIDAPI_PROXY_SECRET: 'proxy-secret' }).marketplaces[0]?.secret).toBe('proxy-secret');
  });

  it('with optionalSecrets (every command but a reader) it loads without the secret, and a reader refuses it', async () => {
    await yaml(market(['secret_env: RAPIDAPI_PROXY_SECRET']).join('\n'));
    for (const env of [{}, { RAPIDAPI_PROXY_SECRET: '' }]) {
      const config = loadConfig({ env, cwd, optionalSecrets: true });
      expect(config.marketplaces[0]?.secret).toBeUndefined();
      let err: unknown;
      try {
        requireMarketplaceSecrets(config);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).path).toBe('marketplaces[0].secret_env');
      expect((err as ConfigError).message).toMatch(/RAPIDAPI_PROXY_SECRET is not set/);
      expect(() => createMarketplaceAuth(config.marketplaces, config.plans)).toThrow(/RAPIDAPI_PROXY_SECRET is not set/);
    }
    const set = loadConfig({ env: { RAPIDAPI_PROXY_SECRET: 'proxy-secret' }, cwd, optionalSecrets: true });
    expect(set.marketplaces[0]?.secret).toBe('proxy-secret');
    expect(() => requireMarketplaceSecrets(set)).not.toThrow();
  });
});

describe('the returned config', () => {
  function unfrozen(value: unknown, path: string, out: string[]): string[] {
    if (value !== null && typeof value === 'object') {
      if (!Object.isFrozen(value)) out.push(path || '(root)');
      for (const [k, v] of Object.entries(value)) unfrozen(v, `${path}.${k}`, out);
    }
    return out;
  }

  it('is deeply frozen', async () => {
    await yaml(
      ['marketplaces:', '  - { name: m, secret_header: X-S, secret: "0123456789", user_header: X-U, plan_header: X-P, plans: { A: free } }', ''].join('\n'),
    );
    const c: Config = load({ TLS_CERT_FILE: 'c.pem', TLS_KEY_FILE: 'k.pem' });
    expect(unfrozen(c, '', [])).toEqual([]);
    // ESM is strict mode: writes to frozen objects throw.
    const loose = c as unknown as Record<string, Record<string, unknown>>;
    expect(() => {
      loose.http!.port = 1;
    }).toThrow(TypeError);
    expect(() => (c.bookmakers as unknown as unknown[]).push({})).toThrow(TypeError);
    expect(() => {
      (c.plans.free!.allow as string[])[0] = '*';
    }).toThrow(TypeError);
    expect(() => {
      (c.marketplaces[0]!.plans as Record<string, string>).B = 'pro';
    }).toThrow(TypeError);
    expect(() => {
      (c.limits as { maxFileBytes: number }).maxFileBytes = 1;
    }).toThrow(TypeError);
    expect(c.http.port).toBe(8080);
  });

  it('each load gives its own object', () => {
    const a = load();
    const b = load({ PORT: '9000' });
    expect(a.http.port).toBe(8080);
    expect(b.http.port).toBe(9000);
  });
});
