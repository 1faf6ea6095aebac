/**
 * The front door (src/reader/data/front-door.ts) against Fastify's routes, over real HTTP: two readers
 * on the same published files and the same Redis, one with `reader.hot_path` on (the default) and
 * one with it off, each with its own copy of every key so that their rate counters run alike.
 * Both send what the one v1 handler resolves; every request below goes to both, and they must
 * answer the same status, the same headers in the same order (Date and the seconds to the
 * window's end aside), the same bytes, the same request line and the same metrics. Each request
 * also says which sender must carry it on the first reader, so that the comparison cannot pass
 * with the front door never taken, and so that every form Fastify routes is seen to go there.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCatalog } from '../../src/catalog/redis-catalog.js';
import { loadConfig, type Config } from '../../src/config.js';
import { createKeyStore } from '../../src/keys/store.js';
import { createLogger } from '../../src/log.js';
import { createMetrics, type Metrics } from '../../src/ops/metrics.js';
import { registerOps } from '../../src/ops/ops-plugin.js';
import { buildReaderApp, frontDoorAnswered } from '../../src/reader/app.js';
import { createReaderState, type ReaderState } from '../../src/reader/state.js';
import { createRedis } from '../../src/redis/connect.js';
import { createReaderFixture, IN_TEST_PRESSURE, oddsDocument, type ReaderFixture } from '../helpers/reader-fixture.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';
import { waitFor } from '../helpers/service.js';

const LIVE = 'site_live_northwind_soccer.json';
const PREGAME = 'site_pregame_northwind_soccer.json';
const SECRET = 'hot-path-marketplace-secret-0123456789';

const CONFIG = `
plans:
  free: { allow: ["site_pregame_*"], rate: { max: 1000, per: 1m } }
  pro:  { allow: ["*"], rate: { max: 1000, per: 1m } }
  tight: { allow: ["*"], rate: { max: 40, per: 1m } }
marketplaces:
  - name: rapidapi
    secret_header: X-RapidAPI-Proxy-Secret
    secret: "${SECRET}"
    user_header: X-RapidAPI-User
    plan_header: X-RapidAPI-Subscription
    plans: { BASIC: free, PRO: pro }
reader:
  trust_proxy: loopback
  auth_failures: { max: 1000, per: 1m }
`;

/** Who must carry the request on the first reader: the front door, or Fastify's routes. */
type Lane = 'hot' | 'app';

interface Reader {
  readonly name: string;
  readonly app: FastifyInstance;
  readonly state: ReaderState;
  readonly metrics: Metrics;
  readonly lines: Record<string, unknown>[];
  readonly keys: Record<string, string>;
  /** Key id → role, to compare request lines across readers. */
  readonly roleOf: Map<string, string>;
  readonly url: string;
  readonly connections: Redis[];
}

interface Reply {
  readonly status: number;
  /** Raw header names and values, in the order sent. */
  readonly headers: string[];
  readonly body: Buffer;
}

function get(base: string, path: string, headers: Record<string, string>, method = 'GET', body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    // Options, not a URL string: a URL would be normalised (no `..`) before it is sent.
    const { hostname, port } = new URL(base);
    const req = httpRequest({ hostname, port, path, method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.rawHeaders, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** What must be equal across the lanes: no Date; the window's seconds left may differ by one. */
function comparable(headers: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    let value = headers[i + 1]!;
    if (name.toLowerCase() === 'date') continue;
    if (name === 'ratelimit-reset') value = 'N';
    if (name === 'ratelimit') value = value.replace(/;t=\d+$/, ';t=N');
    out.push(name, value);
  }
  return out;
}

describe('the front door answers as Fastify does', () => {
  let fx: ReaderFixture;
  let dir: string;
  let config: Config;
  const readers: Reader[] = [];
  const roles = ['pro', 'free', 'tight'] as const;
  /** Who answered each request on the hot reader, in order. */

  const connect = async (role: 'client' | 'subscriber', name: string): Promise<Redis> => {
    const c = createRedis(TEST_REDIS_URL, role, `${fx.prefix}-${name}`);
    c.on('error', () => undefined);
    if (c.status !== 'ready') await new Promise((r) => c.once('ready', r));
    return c;
  };

  const startReader = async (name: string, hotPath: boolean, preClose?: () => Promise<void>): Promise<Reader> => {
    const keyStore = createKeyStore({ redis: fx.redis, keys: fx.keys, plans: config.plans });
    const keys: Record<string, string> = {};
    const roleOf = new Map<string, string>();
    for (const role of roles) {
      const made = await keyStore.create({ name: `${name}-${role}`, plan: role });
      keys[role] = made.key;
      roleOf.set(made.record.id, role);
    }
    const live = await keyStore.create({ name: `${name}-live`, allow: ['site_live_*'] });
    keys.live = live.key;
    roleOf.set(live.record.id, 'live');

    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
        cb();
      },
    });
    const log = createLogger({ level: 'info', destination: sink, pretty: false });
    const metrics = createMetrics({ defaultMetrics: false });
    const client = await connect('client', `${name}-client`);
    const subscriber = await connect('subscriber', `${name}-sub`);
    const limits = await connect('client', `${name}-limits`);
    const readerConfig: Config = { ...config, reader: { ...config.reader, hotPath } };
    const state = await createReaderState({
      config: readerConfig,
      redis: client,
      subscriber,
      store: fx.store,
      catalog: createCatalog(client, fx.keys),
      log,
      registry: fx.registry,
    });
    const app = await buildReaderApp({
      config: readerConfig,
      redis: client,
      store: fx.store,
      log,
      state,
      limits: { redis: limits, subscriber, metrics },
      onAuthFailed: (reason) => metrics.authFailed(reason),
      onFrontDoorResponse: (route, method, status, ms) => metrics.httpResponse(route, method, status, ms),
      pressure: IN_TEST_PRESSURE,
      register: async (a) => {
        await registerOps(a, { config: readerConfig, metrics });
        if (preClose) a.addHook('preClose', preClose);
      },
    });
    await state.ready;
    await state.refresh();
    const url = (await app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    return { name, app, state, metrics, lines, keys, roleOf, url, connections: [client, subscriber, limits] };
  };

  beforeAll(async () => {
    fx = await createReaderFixture('hot-path');
    dir = await mkdtemp(join(tmpdir(), 'oddsfiles-hot-path-'));
    const file = join(dir, 'oddsfiles.yaml');
    await writeFile(file, CONFIG);
    config = loadConfig({ env: { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: fx.prefix, DATA_DIR: dir, PORT: '0', ODDSFILES_CONFIG: file }, cwd: dir });
    await fx.publish(LIVE, oddsDocument('northwind', 'soccer', 3000));
    await fx.publish(PREGAME, oddsDocument('northwind', 'soccer', 60_000));
    readers.push(await startReader('hot', true), await startReader('fastify', false));
  }, 30_000);

  afterAll(async () => {
    for (const r of readers) {
      await r.app.close();
      await r.state.close();
      for (const c of r.connections) c.disconnect();
    }
    await fx?.cleanup();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /**
   * Send one request to both readers (`key` names a role: each reader sends its own key of that
   * role) and compare; `lane` is who must answer it on the hot reader.
   */
  const both = async (
    lane: Lane,
    path: string,
    opts: { key?: string; headers?: Record<string, string>; method?: string; body?: string } = {},
  ): Promise<Reply[]> => {
    const replies: Reply[] = [];
    for (const r of readers) {
      const before = frontDoorAnswered(r.app) ?? 0;
      // "{reader}" in a header value: each reader's own (e.g. its own marketplace subscriber).
      const own = Object.fromEntries(Object.entries(opts.headers ?? {}).map(([k, v]) => [k, v.replaceAll('{reader}', r.name)]));
      const headers = { ...(opts.key ? { 'x-api-key': r.keys[opts.key]! } : {}), ...own };
      const linesBefore = r.lines.length;
      replies.push(await get(r.url, path, headers, opts.method, opts.body));
      // The request line is written when the response is done: wait for it.
      for (let i = 0; i < 100 && r.lines.length === linesBefore; i++) await new Promise((res) => setTimeout(res, 2));
      const answered = (frontDoorAnswered(r.app) ?? 0) - before;
      expect(answered, `${r.name}: ${opts.method ?? 'GET'} ${path} taken by the front door`).toBe(r.name === 'hot' && lane === 'hot' ? 1 : 0);
    }
    const [hot, app] = replies as [Reply, Reply];
    const what = `${opts.method ?? 'GET'} ${path} ${JSON.stringify(opts.headers ?? {})}`;
    expect(hot.status, what).toBe(app.status);
    expect(comparable(hot.headers), what).toEqual(comparable(app.headers));
    expect(hot.body.equals(app.body), what).toBe(true);
    const [hl, al] = readers.map((r) => {
      const line = r.lines.filter((l) => l.msg === 'request').at(-1)!;
      expect(line.reqId).toMatch(/^req-[0-9a-z]+$/);
      expect(typeof line.ms).toBe('number');
      const { reqId: _id, ms: _ms, time: _t, keyId, ...rest } = line;
      return { ...rest, key: keyId === undefined ? undefined : (r.roleOf.get(String(keyId)) ?? String(keyId).replaceAll(r.name, '{reader}')) };
    });
    expect(hl, what).toEqual(al);
    return replies;
  };

  it('answers the common requests itself, byte for byte as Fastify does, and hands every other one over', async () => {
    // The first request of a key with a rate leases a block of tokens from Redis (and waits for it).
    await both('hot', '/v1/files', { key: 'pro' });
    await both('hot', '/v1/files', { key: 'free' });
    // Lists, and conditional lists; a key without a plan has no rate to count.
    const [files] = await both('hot', '/v1/files', { key: 'pro' });
    expect(JSON.parse(files!.body.toString())).toEqual({ files: [LIVE, PREGAME] });
    await both('hot', '/v1/files', { key: 'free' });
    await both('hot', '/v1/files', { key: 'live' });
    const etag = files!.headers[files!.headers.indexOf('etag') + 1]!;
    await both('hot', '/v1/files', { key: 'pro', headers: { 'if-none-match': etag } });
    await both('hot', '/v1/files', { key: 'pro', headers: { 'if-none-match': '"other"' } });

    // Downloads: identity, and each coding (the first request of one waits for it to be made).
    const [plain] = await both('hot', `/v1/data/${PREGAME}`, { key: 'pro' });
    expect(plain!.status).toBe(200);
    for (const ae of ['gzip', 'br', 'gzip, br', 'br;q=0.5, gzip', 'identity', '*', 'gzip;q=0']) {
      const fresh = ae.includes('gzip') || ae.includes('br') || ae === '*';
      expect(fresh || ae === 'identity' || ae === 'gzip;q=0').toBe(true);
      await both('hot', `/v1/data/${PREGAME}`, { key: 'pro', headers: { 'accept-encoding': ae } });
    }
    for (const r of readers) await r.state.published.idle();
    const [gz] = await both('hot', `/v1/data/${PREGAME}`, { key: 'pro', headers: { 'accept-encoding': 'gzip' } });
    expect(gz!.headers).toContain('content-encoding');
    const dataEtag = plain!.headers[plain!.headers.indexOf('etag') + 1]!;
    await both('hot', `/v1/data/${PREGAME}`, { key: 'pro', headers: { 'if-none-match': dataEtag } });
    await both('hot', `/v1/data/${PREGAME}`, { key: 'pro', headers: { 'if-none-match': `W/${dataEtag}` } });
    // Deltas: an unknown base (the whole file, with the canonical digest), the current one (304).
    // Each reader builds the digest off its serving loop (the deltas pool), which takes a while on
    // a busy machine: ask both, the same number of times (their rate counts stay alike), until both have it.
    const unknownBase = { 'if-none-match': `"${'0'.repeat(32)}"`, 'a-im': 'json-patch, merge-patch' };
    await waitFor(
      async () => {
        const replies = await Promise.all(readers.map((r) => get(r.url, `/v1/data/${PREGAME}`, { 'x-api-key': r.keys.pro!, ...unknownBase })));
        return replies.every((x) => x.headers.some((h) => h.toLowerCase() === 'json-canonical-sha256'));
      },
      20_000,
      'both readers to have the canonical digest',
      100,
    );
    await both('hot', `/v1/data/${PREGAME}`, { key: 'pro', headers: { 'if-none-match': `"${'0'.repeat(32)}"`, 'a-im': 'json-patch, merge-patch' } });
    await both('hot', `/v1/data/${PREGAME}`, { key: 'pro', headers: { 'if-none-match': dataEtag, 'a-im': 'merge-patch' } });
    await both('hot', `/v1/data/${PREGAME}`, { key: 'pro', headers: { 'if-modified-since': new Date(Date.now() + 3_600_000).toUTCString() } });
    await both('hot', `/v1/data/${PREGAME}`, { key: 'pro', headers: { 'if-modified-since': 'Thu, 01 Jan 2015 00:00:00 GMT' } });

    // Through the marketplace, from behind a trusted proxy (the request line names the client).
    const rapid = (plan: string, secret = SECRET) => ({
      'x-rapidapi-proxy-secret': secret,
      'x-rapidapi-user': 'sub-{reader}',
      'x-rapidapi-subscription': plan,
      'x-forwarded-for': '198.51.100.7',
    });
    await both('hot', `/v1/data/${LIVE}`, { headers: rapid('PRO') });
    await both('hot', `/v1/data/${LIVE}`, { headers: rapid('PRO') });
    expect(readers[0]!.lines.at(-1)).toMatchObject({ ip: '198.51.100.7', keyId: 'mkt:rapidapi:sub-hot', status: 200 });
    await both('hot', `/v1/data/${LIVE}`, { headers: rapid('BASIC') }); // 403: not on the plan's list
    await both('hot', `/v1/data/${LIVE}`, { headers: rapid('ULTRA') }); // 403: plan not mapped
    await both('hot', `/v1/data/${LIVE}`, { headers: rapid('PRO', 'wrong') }); // 401
  });

  it('refuses alike, and hands other methods and every form of the URL that Fastify rewrites to Fastify', async () => {
    await both('hot', '/v1/files'); // 401
    await both('hot', '/v1/files', { headers: { 'x-api-key': 'odf_nonsense' } }); // 401
    await both('hot', `/v1/data/${LIVE}`, { key: 'free' }); // 403
    await both('hot', '/v1/data/site_live_bluewater_tennis.json', { key: 'pro' }); // 404
    await both('hot', '/v1/data/', { key: 'pro' }); // 404
    await both('hot', `/v1/data/../data/${LIVE}`, { key: 'pro' });
    await both('app', `/v1/data/${LIVE.replace('_', '%5F')}`, { key: 'pro' }); // decoded by Fastify: 200
    await both('app', `/v1/data/${LIVE}?fresh=1`, { key: 'pro' }); // the query dropped by Fastify: 200
    await both('app', '/v1/files?x=1', { key: 'pro' });
    await both('app', '/v1/files/', { key: 'pro' }); // 404
    await both('hot', `/v1/data/${LIVE}`, { key: 'pro', method: 'HEAD' });
    await both('hot', `/v1/data/${LIVE}`, { key: 'free', method: 'HEAD' }); // 403
    await both('app', '/v1/files', { key: 'pro', method: 'DELETE' }); // 405
    await both('app', `/v1/data/${'a'.repeat(201)}`, { key: 'pro' }); // 404
    // (Node's client sends no Content-Length of its own on a GET.)
    await both('app', '/v1/files', { key: 'pro', body: '{"a":1}', headers: { 'content-type': 'application/json', 'content-length': '7' } });
    await both('app', '/v1/files', { key: 'pro', body: 'x'.repeat(20_000), headers: { 'content-type': 'text/plain', 'content-length': '20000' } }); // over the body limit
  });

  it('counts the plan rate alike, whether a token is held here or must be leased from Redis', async () => {
    // tight: 40 a minute, leased in blocks of an eighth of what is left (5, 4, 3, ...): the
    // request that finds no token left waits for Redis, the others use the block; once the window
    // is full every request is a 429. The front door carries all of them.
    const statuses: number[] = [];
    for (let i = 0; i < 43; i++) statuses.push((await both('hot', '/v1/files', { key: 'tight' }))[0]!.status);
    expect(statuses).toEqual([...Array<number>(40).fill(200), 429, 429, 429]);
  });

  it('leaves the same metrics', async () => {
    const counts = async (m: Metrics) =>
      (await m.render())
        .split('\n')
        .filter((l) => /^oddsfiles_(http_requests_total|http_request_duration_seconds_count|auth_failures_total|rate_limited_total)\{/.test(l))
        .sort();
    const [hot, app] = await Promise.all(readers.map((r) => counts(r.metrics)));
    expect(hot!.some((l) => l.includes('route="/v1/data/*"') && l.includes('status="200"'))).toBe(true);
    expect(hot).toEqual(app);
  });

  it('leaves every request to Fastify once the app is closing, so that keep-alive clients are told to go', async () => {
    let release!: () => void;
    let closingStarted!: () => void;
    const started = new Promise<void>((r) => (closingStarted = r));
    const held = new Promise<void>((r) => (release = r));
    const r = await startReader('closing', true, async () => {
      closingStarted();
      await held;
    });
    try {
      const before = await get(r.url, '/v1/files', { 'x-api-key': r.keys.pro! });
      const again = await get(r.url, '/v1/files', { 'x-api-key': r.keys.pro! });
      expect([before.status, again.status]).toEqual([200, 200]);
      expect(frontDoorAnswered(r.app)).toBe(2);
      const closed = r.app.close();
      await started;
      // Still listening (a preClose hook holds the close), but closing: Fastify answers.
      const during = await get(r.url, '/v1/files', { 'x-api-key': r.keys.pro! });
      expect(during.status).toBe(200);
      expect(during.headers[during.headers.findIndex((h) => h.toLowerCase() === 'connection') + 1]).toBe('close');
      expect(frontDoorAnswered(r.app)).toBe(2);
      release();
      await closed;
    } finally {
      release();
      await r.state.close();
      for (const c of r.connections) c.disconnect();
    }
  });

  it('answers nothing with `hot_path: false`', () => {
    expect(frontDoorAnswered(readers[0]!.app)).toBeGreaterThan(20);
    expect(frontDoorAnswered(readers[1]!.app)).toBeUndefined();
  });
});
