/**
 * Configuration: environment variables (CONTRACT §2) plus the optional YAML file, loaded once,
 * validated, frozen and passed down explicitly. Nothing else in the project reads process.env.
 */
import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';
import { Ajv, type ErrorObject } from 'ajv';
import { parseDocument } from 'yaml';
import { ConfigError } from './errors.js';
import { parseDuration } from './duration.js';
import { schemaPath } from './paths.js';
import { SYNC_IO_MAX_BYTES } from './sync-io.js';

export type FeedFamily = 'split' | 'combined-live' | 'livepre';
export type FeedKind = 'live' | 'pregame' | 'livepre';
/** Which requests the reader logs a line for (`reader.request_log`). */
export type RequestLogMode = 'all' | 'errors' | 'off';

export interface Bookmaker {
  /** Company key, used in filenames. */
  readonly key: string;
  /** Public name; its lowercase form is accepted in a document's `bookmaker` field. */
  readonly name: string;
  readonly feeds: FeedFamily;
}

export interface Rate {
  readonly max: number;
  readonly perMs: number;
}

export interface Plan {
  readonly name: string;
  readonly allow: readonly string[];
  readonly rate: Rate | undefined;
}

export interface Marketplace {
  readonly name: string;
  readonly secretHeader: string;
  /**
   * The proxy secret. Undefined only when loaded with `optionalSecrets` and its `secret_env` is
   * not set; `missingSecret` then holds the error a reader must raise.
   */
  readonly secret: string | undefined;
  readonly missingSecret?: ConfigError;
  readonly userHeader: string;
  readonly planHeader: string;
  readonly plans: Readonly<Record<string, string>>;
}

export interface Config {
  readonly dataDir: string;
  readonly inboxDir: string;
  readonly rejectedDir: string;
  readonly storeUrl: string;
  readonly redis: {
    readonly url: string;
    /** REDIS_URL was set: never fall back to a private redis-server. */
    readonly explicit: boolean;
    readonly prefix: string;
  };
  readonly http: {
    readonly host: string;
    readonly port: number;
    readonly tls: { readonly certFile: string; readonly keyFile: string } | undefined;
  };
  /** METRICS_PORT: a separate /metrics listener (on HOST), for processes without the reader. */
  readonly metricsPort: number | undefined;
  readonly s3: {
    readonly endpoint: string | undefined;
    readonly forcePathStyle: boolean;
    readonly region: string | undefined;
  };
  readonly configFile: string | undefined;
  readonly adminToken: string | undefined;
  readonly logLevel: string;
  readonly bookmakers: readonly Bookmaker[];
  readonly sports: readonly string[];
  readonly plans: Readonly<Record<string, Plan>>;
  readonly marketplaces: readonly Marketplace[];
  readonly limits: {
    readonly maxFileBytes: number;
    readonly futureSkewMs: number;
    /** Deepest nesting of arrays and objects a document may have. */
    readonly maxDepth: number;
  };
  readonly staleAfterMs: Readonly<Record<FeedKind, number>>;
  readonly ingest: {
    readonly concurrency: number;
    /** How long a file written in place must stay unchanged before it is read. */
    readonly settleMs: number;
    /** Period of the full inbox rescan (inotify drops events on overflow). */
    readonly rescanMs: number;
    /**
     * 0: the kernel reports drops (inotify through fs.watch). Otherwise poll the inbox at this
     * period (chokidar's polling mode), for folders whose writes raise no kernel event: NFS or
     * SMB shares written from other machines, some container bind mounts.
     */
    readonly pollMs: number;
    readonly keepVersions: number;
    readonly shutdownTimeoutMs: number;
    /** BullMQ lock: how soon a job of a killed worker is taken up again. */
    readonly lockDurationMs: number;
    /**
     * Versions up to this size are carried to readers in other processes ahead of their
     * announcement (no store read back); 0 carries none. See src/ingest/carry.ts.
     */
    readonly carryMaxBytes: number;
    /** Carried bytes per second, per worker process. */
    readonly carryBytesPerSecond: number;
    /**
     * Drops and store objects up to this size are read and written with synchronous calls, only
     * the fsyncs on the thread pool; 0: every file call on the thread pool (an inbox or store on a
     * network filesystem). See src/sync-io.ts.
     */
    readonly syncIoMaxBytes: number;
  };
  readonly reader: {
    readonly refreshMs: number;
    readonly trustProxy: boolean | string | number;
    readonly authFailures: Rate;
    /**
     * The per-request log line: `all` (one per request), `errors` (only responses of 400 and up),
     * `off` (none; failed requests are still logged as errors). See src/reader/request-log.ts.
     */
    readonly requestLog: RequestLogMode;
    /**
     * Answer the common case of /v1 (an authenticated GET that will be 200 or 304) on Node's
     * request event, before Fastify (src/reader/hot-path.ts); off: every request goes through Fastify.
     */
    readonly hotPath: boolean;
  };
}

/** The embedded defaults of the YAML part: the example registry of seven bookmakers. */
export const DEFAULT_FILE_CONFIG = {
  bookmakers: [
    { key: 'northwind', name: 'Northwind', feeds: 'split' },
    { key: 'bluewater', name: 'Bluewater', feeds: 'split' },
    { key: 'redstone', name: 'Redstone', feeds: 'split' },
    { key: 'goldcrest', name: 'Goldcrest', feeds: 'split' },
    { key: 'hillview', name: 'StarBet', feeds: 'split' },
    { key: 'silverline', name: 'Silverline', feeds: 'combined-live' },
    { key: 'oddsport', name: 'OddSport', feeds: 'livepre' },
  ],
  sports: ['soccer', 'basketball', 'tennis'],
  plans: {
    free: { allow: ['site_pregame_*'], rate: { max: 30, per: '1m' } },
    pro: { allow: ['*'], rate: { max: 600, per: '1m' } },
  },
  marketplaces: [],
  limits: { max_file_bytes: 52_428_800, future_skew: '5m', max_depth: 64 },
  stale_after: { live: '30s', pregame: '15m', livepre: '30s' },
  ingest: {
    concurrency: 4,
    settle: '50ms',
    rescan: '5s',
    poll: '0s',
    keep_versions: 10,
    shutdown_timeout: '10s',
    lock_duration: '15s',
    carry_max_bytes: 262_144,
    carry_bytes_per_second: 16_777_216,
    sync_io_max_bytes: SYNC_IO_MAX_BYTES,
  },
  reader: { refresh: '30s', trust_proxy: false, auth_failures: { max: 20, per: '1m' }, request_log: 'all' as RequestLogMode, hot_path: true },
} as const;

type Env = Readonly<Record<string, string | undefined>>;

export interface LoadOptions {
  env?: Env;
  cwd?: string;
  /**
   * A marketplace whose `secret_env` is not set loads with no secret instead of failing: for the
   * commands that serve no marketplace traffic (every one but a reader), so that `keys list` or a
   * worker does not need the reader's secret. The reader refuses such a configuration
   * (requireMarketplaceSecrets).
   */
  optionalSecrets?: boolean;
}

/** Load, validate and freeze the configuration. Throws ConfigError naming the file and path. */
export function loadConfig(options: LoadOptions = {}): Config {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const configFile = findConfigFile(env, cwd);
  const fileConfig = configFile ? readConfigFile(configFile) : {};
  const merged = mergeFileConfig(fileConfig);
  validateFileConfig(merged, configFile);
  return deepFreeze(buildConfig(env, cwd, merged, configFile, options.optionalSecrets ?? false));
}

/** Throws the ConfigError of the first marketplace loaded without its secret (optionalSecrets). */
export function requireMarketplaceSecrets(config: Config): void {
  for (const m of config.marketplaces) if (m.secret === undefined) throw m.missingSecret ?? new ConfigError(config.configFile, 'marketplaces', `${m.name}: no secret`);
}

function findConfigFile(env: Env, cwd: string): string | undefined {
  const explicit = env.ODDSFILES_CONFIG;
  if (explicit !== undefined && explicit !== '') {
    const path = resolve(cwd, explicit);
    if (!existsSync(path)) throw new ConfigError(path, '', 'file not found (ODDSFILES_CONFIG)');
    return path;
  }
  const fallback = resolve(cwd, 'oddsfiles.yaml');
  return existsSync(fallback) ? fallback : undefined;
}

function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(path, '', `cannot read: ${(err as Error).message}`);
  }
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    const line = e.linePos?.[0];
    // The first line of a yaml error repeats the position ("… at line 4, column 1:"): it is in the path already.
    const problem = e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
    throw new ConfigError(path, line ? `line ${line.line}, column ${line.col}` : '', problem);
  }
  const value: unknown = doc.toJS();
  if (value === null || value === undefined) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new ConfigError(path, '', 'must be a mapping (key: value) at the top level');
  }
  return value as Record<string, unknown>;
}

const MERGED_SECTIONS = ['limits', 'stale_after', 'ingest', 'reader'] as const;

function mergeFileConfig(file: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...structuredClone(DEFAULT_FILE_CONFIG) };
  for (const [key, value] of Object.entries(file)) {
    const isSection = (MERGED_SECTIONS as readonly string[]).includes(key);
    if (isSection && value && typeof value === 'object' && !Array.isArray(value)) {
      out[key] = { ...(out[key] as object), ...value };
    } else {
      out[key] = value;
    }
  }
  return out;
}

let compiledValidator: ReturnType<Ajv['compile']> | undefined;

function validateFileConfig(config: Record<string, unknown>, file: string | undefined): void {
  if (!compiledValidator) {
    const schema = JSON.parse(readFileSync(schemaPath('config.schema.json'), 'utf8')) as object;
    compiledValidator = new Ajv({ allErrors: false, strict: false }).compile(schema);
  }
  if (!compiledValidator(config)) {
    const err = compiledValidator.errors?.[0] as ErrorObject;
    throw new ConfigError(file, pathOf(err.instancePath), describeAjvError(err));
  }
}

function pathOf(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((p) => (/^\d+$/.test(p) ? `[${p}]` : `.${p.replaceAll('~1', '/').replaceAll('~0', '~')}`))
    .join('')
    .replace(/^\./, '');
}

function describeAjvError(err: ErrorObject): string {
  if (err.keyword === 'additionalProperties') {
    return `unknown setting "${String(err.params.additionalProperty)}"`;
  }
  // A marketplace needs exactly one of secret and secret_env (the schema's only such oneOf).
  if (err.keyword === 'oneOf' && /^\/marketplaces\/\d+$/.test(err.instancePath)) return 'set secret or secret_env, not both';
  if (err.keyword === 'required' && err.schemaPath.includes('/oneOf/') && /^\/marketplaces\/\d+$/.test(err.instancePath)) {
    return 'set secret or secret_env (the name of an environment variable holding the secret)';
  }
  if (err.keyword === 'enum') return `${err.message}: ${JSON.stringify(err.params.allowedValues)}`;
  if (err.keyword === 'pattern' && String(err.params.pattern).includes('ms|s|m|h|d')) {
    return 'must be a duration such as 500ms, 30s, 1m, 1h';
  }
  return err.message ?? err.keyword;
}

function buildConfig(
  env: Env,
  cwd: string,
  file: Record<string, unknown>,
  configFile: string | undefined,
  optionalSecrets: boolean,
): Config {
  // The schema has been checked: the casts below only name shapes it guarantees.
  const f = file as unknown as FileShape;
  const where = (path: string, problem: string) => new ConfigError(configFile, path, problem);
  const dur = (text: string) => parseDuration(text) as number;

  const dataDir = resolve(cwd, env.DATA_DIR || './var');
  const dirFromEnv = (name: string, fallback: string) => resolve(cwd, env[name] || fallback);

  const bookmakers = f.bookmakers.map((b) => ({ key: b.key, name: b.name, feeds: b.feeds }));
  const seen = new Set<string>();
  bookmakers.forEach((b, i) => {
    if (seen.has(b.key)) throw where(`bookmakers[${i}].key`, `duplicate bookmaker key "${b.key}"`);
    seen.add(b.key);
  });

  const plans: Record<string, Plan> = {};
  for (const [name, p] of Object.entries(f.plans)) {
    plans[name] = {
      name,
      allow: [...p.allow],
      rate: p.rate ? { max: p.rate.max, perMs: dur(p.rate.per) } : undefined,
    };
  }

  const marketplaces = f.marketplaces.map((m, i): Marketplace => {
    let secret = m.secret;
    let missingSecret: ConfigError | undefined;
    if (secret === undefined) {
      secret = env[m.secret_env as string] || undefined;
      if (secret === undefined) {
        missingSecret = where(`marketplaces[${i}].secret_env`, `environment variable ${m.secret_env} is not set`);
        if (!optionalSecrets) throw missingSecret;
      }
    }
    for (const [theirs, ours] of Object.entries(m.plans)) {
      if (!plans[ours]) throw where(`marketplaces[${i}].plans.${theirs}`, `no plan named "${ours}"`);
    }
    return {
      name: m.name,
      secretHeader: m.secret_header.toLowerCase(),
      secret,
      ...(missingSecret ? { missingSecret } : {}),
      userHeader: m.user_header.toLowerCase(),
      planHeader: m.plan_header.toLowerCase(),
      plans: { ...m.plans },
    };
  });

  const port = parseIntEnv(env, 'PORT', 8080, 0, 65535);
  const metricsPort = env.METRICS_PORT ? parseIntEnv(env, 'METRICS_PORT', 0, 0, 65535) : undefined;
  const certFile = env.TLS_CERT_FILE || undefined;
  const keyFile = env.TLS_KEY_FILE || undefined;
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new ConfigError(undefined, certFile ? 'TLS_KEY_FILE' : 'TLS_CERT_FILE', 'set both TLS_CERT_FILE and TLS_KEY_FILE, or neither');
  }

  const storeUrl = normaliseStoreUrl(env.STORE_URL || pathToFileURL(resolve(dataDir, 'store')).href, cwd);
  const prefix = env.REDIS_PREFIX || 'oddsfiles';
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(prefix)) {
    throw new ConfigError(undefined, 'REDIS_PREFIX', 'use letters, digits and _ . : - only (at most 64)');
  }
  const logLevel = env.LOG_LEVEL || 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(undefined, 'LOG_LEVEL', `unknown level "${logLevel}"`);
  }

  return {
    dataDir,
    inboxDir: dirFromEnv('INBOX_DIR', resolve(dataDir, 'inbox')),
    rejectedDir: dirFromEnv('REJECTED_DIR', resolve(dataDir, 'rejected')),
    storeUrl,
    redis: {
      url: env.REDIS_URL || 'redis://127.0.0.1:6379',
      explicit: Boolean(env.REDIS_URL),
      prefix,
    },
    http: {
      host: env.HOST || '127.0.0.1',
      port,
      tls: certFile && keyFile ? { certFile: resolve(cwd, certFile), keyFile: resolve(cwd, keyFile) } : undefined,
    },
    metricsPort,
    s3: {
      endpoint: env.S3_ENDPOINT || undefined,
      forcePathStyle: /^(1|true|yes)$/i.test(env.S3_FORCE_PATH_STYLE ?? ''),
      region: env.AWS_REGION || env.AWS_DEFAULT_REGION || undefined,
    },
    configFile,
    adminToken: env.ADMIN_TOKEN || undefined,
    logLevel,
    bookmakers,
    sports: [...f.sports],
    plans,
    marketplaces,
    limits: {
      maxFileBytes: f.limits.max_file_bytes,
      futureSkewMs: dur(f.limits.future_skew),
      maxDepth: f.limits.max_depth,
    },
    staleAfterMs: {
      live: dur(f.stale_after.live),
      pregame: dur(f.stale_after.pregame),
      livepre: dur(f.stale_after.livepre),
    },
    ingest: {
      concurrency: f.ingest.concurrency,
      settleMs: dur(f.ingest.settle),
      rescanMs: dur(f.ingest.rescan),
      pollMs: dur(f.ingest.poll),
      keepVersions: f.ingest.keep_versions,
      shutdownTimeoutMs: dur(f.ingest.shutdown_timeout),
      lockDurationMs: dur(f.ingest.lock_duration),
      carryMaxBytes: f.ingest.carry_max_bytes,
      carryBytesPerSecond: f.ingest.carry_bytes_per_second,
      syncIoMaxBytes: f.ingest.sync_io_max_bytes,
    },
    reader: {
      refreshMs: dur(f.reader.refresh),
      trustProxy: f.reader.trust_proxy,
      authFailures: { max: f.reader.auth_failures.max, perMs: dur(f.reader.auth_failures.per) },
      requestLog: f.reader.request_log,
      hotPath: f.reader.hot_path,
    },
  };
}

function parseIntEnv(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(undefined, name, `must be a whole number from ${min} to ${max}, not "${raw}"`);
  }
  return n;
}

function normaliseStoreUrl(url: string, cwd: string): string {
  if (url.startsWith('s3://')) {
    if (!/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?$/.test(url)) {
      throw new ConfigError(undefined, 'STORE_URL', `not a valid s3://bucket/prefix URL: "${url}"`);
    }
    return url;
  }
  if (url.startsWith('file://')) {
    try {
      return pathToFileURL(fileURLToPath(url)).href;
    } catch (err) {
      throw new ConfigError(undefined, 'STORE_URL', `use file:///absolute/dir: ${(err as Error).message}`);
    }
  }
  if (isAbsolute(url) || url.startsWith('.')) return pathToFileURL(resolve(cwd, url)).href;
  throw new ConfigError(undefined, 'STORE_URL', `use file:///absolute/dir or s3://bucket/prefix, not "${url}"`);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

interface FileShape {
  bookmakers: { key: string; name: string; feeds: FeedFamily }[];
  sports: string[];
  plans: Record<string, { allow: string[]; rate?: { max: number; per: string } }>;
  marketplaces: {
    name: string;
    secret_header: string;
    secret?: string;
    secret_env?: string;
    user_header: string;
    plan_header: string;
    plans: Record<string, string>;
  }[];
  limits: { max_file_bytes: number; future_skew: string; max_depth: number };
  stale_after: { live: string; pregame: string; livepre: string };
  ingest: {
    concurrency: number;
    settle: string;
    rescan: string;
    poll: string;
    keep_versions: number;
    shutdown_timeout: string;
    lock_duration: string;
    carry_max_bytes: number;
    carry_bytes_per_second: number;
    sync_io_max_bytes: number;
  };
  reader: {
    refresh: string;
    trust_proxy: boolean | string | number;
    auth_failures: { max: number; per: string };
    request_log: RequestLogMode;
    hot_path: boolean;
  };
}
