/**
 * The operator endpoints over HTTP: /metrics and /admin/queues on a bare Fastify app with a real
 * BullMQ queue on the real Redis (own prefix), the token and loopback rules, the metric names,
 * labels and values after a known set of events, freshness, queue depth, the HTTP counter's
 * bounded route labels, the worker-only metrics listener, and no secret in any log line.
 */
import { request as httpRequest } from 'node:http';
import { Writable } from 'node:stream';
import { fastify, type FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../../src/catalog/types.js';
import { loadConfig, type Config } from '../../src/config.js';
import { createIngestQueue, type IngestQueue } from '../../src/ingest/queue.js';
import { createLogger } from '../../src/log.js';
import { checkAdminAccess, isLoopbackAddress, isLoopbackHost } from '../../src/ops/admin-guard.js';
import { startMetricsServer } from '../../src/ops/metrics-server.js';
import { createMetrics, type Metrics } from '../../src/ops/metrics.js';
import type { QueueProvider } from '../../src/ops/dashboard.js';
import { registerOps } from '../../src/ops/ops-plugin.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const TOKEN = 'adm-7Qx9-correct-horse-battery-staple';
const API_KEY = 'ofk_live_9f8e7d6c5b4a39281706f5e4d3c2b1a0';
const NOW = Date.parse('2026-11-22T06:00:00Z');

/** Parse the Prometheus text format: "name{a="b",...} value" → samples. */
function parseExposition(text: string): { name: string; labels: Record<string, string>; value: number }[] {
  const out: { name: string; labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const hit = parseExposition(text).find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return hit?.value;
}

/** fetch() may not set Host: a plain node:http request can. */
function statusWithHost(url: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

function entry(filename: string, kind: CatalogEntry['kind'], generatedAgoS: number, publishedAgoS: number): CatalogEntry {
  return {
    filename,
    bookmaker: filename.split('_')[2]!.replace('.json', ''),
    kind,
    sport: null,
    object: `objects/${filename}/x.json`,
    sha256: 'x',
    size: 100,
    generatedAt: new Date(NOW - generatedAgoS * 1000).toISOString(),
    generatedAtMs: NOW - generatedAgoS * 1000,
    publishedAt: new Date(NOW - publishedAgoS * 1000).toISOString(),
  };
}

describe('operator endpoints', () => {
  const prefix = uniquePrefix('ops-http');
  let connection: Redis;
  let queue: IngestQueue;
  let baseConfig: Config;
  const logLines: string[] = [];
  const apps: FastifyInstance[] = [];

  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logLines.push(line);
      cb();
    },
  });

  async function buildApp(
    adminToken: string | undefined,
    metrics: Metrics,
    extra: { trustProxy?: boolean; withQueue?: boolean; queue?: QueueProvider } = {},
  ): Promise<FastifyInstance> {
    const log = createLogger({ level: 'trace', destination: sink, pretty: false });
    const app = fastify({ loggerInstance: log, trustProxy: extra.trustProxy ?? false }) as unknown as FastifyInstance;
    await registerOps(app, { config: { ...baseConfig, adminToken }, metrics, ...(extra.withQueue === false ? {} : { queue: extra.queue ?? queue }) });
    app.get('/v1/data/:filename', async () => ({ ok: true }));
    app.setNotFoundHandler((_request, reply) => reply.code(404).send({ notFound: 'the app' }));
    await app.ready();
    apps.push(app);
    return app;
  }

  beforeAll(async () => {
    baseConfig = loadConfig({ env: { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix, DATA_DIR: '/tmp/oddsfiles-ops-http' }, cwd: '/tmp' });
    connection = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    queue = createIngestQueue(connection, prefix);
    // A known queue: three waiting drops and one delayed (no worker runs in this file).
    for (const n of ['site_live_northwind_soccer.json', 'site_live_bluewater_tennis.json', 'site_pregame_redstone_soccer.json']) {
      await queue.add('drop', { name: n, receivedAt: NOW });
    }
    await queue.add('drop', { name: 'site_livepre_oddsport.json', receivedAt: NOW }, { delay: 3_600_000 });
  });

  afterAll(async () => {
    for (const app of apps) await app.close();
    await queue?.close();
    connection?.disconnect();
    await dropPrefix(prefix);
  });

  describe('with ADMIN_TOKEN set', () => {
    let app: FastifyInstance;
    beforeAll(async () => {
      app = await buildApp(TOKEN, createMetrics());
    });

    for (const url of ['/metrics', '/admin/queues', '/admin/queues/api/queues']) {
      it(`${url}: no token → 401, wrong → 401, right → 200`, async () => {
        const none = await app.inject({ url });
        expect(none.statusCode).toBe(401);
        expect(none.headers['content-type']).toBe('application/problem+json');
        const body = none.json<{ type: string; title: string; status: number; detail: string }>();
        // A problem of its own: no API key is involved here.
        expect(body).toMatchObject({ status: 401, type: 'https://oddsfiles.dev/problems/admin-unauthorized', title: 'Missing or invalid admin token' });
        expect(body.detail).toMatch(/admin token/);
        expect(none.headers['www-authenticate']).toEqual([`Bearer realm="oddsfiles-admin"`, `Basic realm="oddsfiles-admin", charset="UTF-8"`]);

        const wrong = await app.inject({ url, headers: { authorization: `Bearer ${TOKEN}x` } });
        expect(wrong.statusCode).toBe(401);
        expect(wrong.headers['content-type']).toBe('application/problem+json');
        expect(String(wrong.headers['www-authenticate'])).toMatch(/invalid_token/);
        expect(wrong.json()).toMatchObject({ status: 401, type: 'https://oddsfiles.dev/problems/admin-unauthorized', title: 'Missing or invalid admin token' });
        // An API key is not the admin token.
        expect((await app.inject({ url, headers: { 'x-api-key': API_KEY } })).statusCode).toBe(401);

        expect((await app.inject({ method: 'HEAD', url })).statusCode).toBe(401);

        const right = await app.inject({ url, headers: { authorization: `Bearer ${TOKEN}` } });
        expect(right.statusCode).toBe(200);
        // The token works from anywhere, not only loopback.
        const remote = await app.inject({ url, remoteAddress: '203.0.113.9', headers: { authorization: `bearer ${TOKEN}` } });
        expect(remote.statusCode).toBe(200);
        // Basic with the token as the password (what a browser's login prompt sends).
        const basic = await app.inject({ url, headers: { authorization: `Basic ${Buffer.from(`ops:${TOKEN}`).toString('base64')}` } });
        expect(basic.statusCode).toBe(200);
        const basicWrong = await app.inject({ url, headers: { authorization: `Basic ${Buffer.from(`ops:nope`).toString('base64')}` } });
        expect(basicWrong.statusCode).toBe(401);
      });
    }

    it('/metrics is Prometheus text; the dashboard is HTML and its API lists the queue "ingest"', async () => {
      const auth = { authorization: `Bearer ${TOKEN}` };
      const m = await app.inject({ url: '/metrics', headers: auth });
      expect(m.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
      expect(m.headers['cache-control']).toBe('no-store');
      const d = await app.inject({ url: '/admin/queues', headers: auth });
      expect(d.headers['content-type']).toMatch(/^text\/html/);
      expect(d.body).toContain('/admin/queues/');
      const api = await app.inject({ url: '/admin/queues/api/queues', headers: auth });
      const queues = api.json<{ queues: { name: string; counts: Record<string, number>; readOnlyMode: boolean }[] }>().queues;
      expect(queues.map((q) => q.name)).toEqual(['ingest']);
      expect(queues[0]!.counts).toMatchObject({ waiting: 3, delayed: 1 });
      expect(queues[0]!.readOnlyMode).toBe(true);
      // Static assets are behind the guard too.
      expect((await app.inject({ url: '/admin/queues/static/images/logo.svg' })).statusCode).toBe(401);
    });

    it('refuses a state-changing request that a browser marks cross-site, even with the token', async () => {
      const res = await app.inject({
        method: 'PUT',
        url: '/admin/queues/api/queues/ingest/pause',
        headers: { authorization: `Bearer ${TOKEN}`, origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
      });
      expect(res.statusCode).toBe(403);
      expect(res.headers['content-type']).toBe('application/problem+json');
      expect(res.json()).toMatchObject({
        status: 403,
        type: 'https://oddsfiles.dev/problems/admin-cross-site',
        title: 'Cross-site requests may not change the admin endpoints',
      });
      expect(await queue.isPaused()).toBe(false);
    });

    it('counts failed admin authentications', async () => {
      const metrics = createMetrics({ defaultMetrics: false });
      const a = await buildApp(TOKEN, metrics, { withQueue: false });
      await a.inject({ url: '/metrics' });
      await a.inject({ url: '/metrics', headers: { authorization: 'Bearer wrong' } });
      const text = (await a.inject({ url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } })).body;
      expect(sample(text, 'oddsfiles_auth_failures_total', { reason: 'admin_token' })).toBe(2);
      expect(sample(text, 'oddsfiles_http_requests_total', { route: '/metrics', method: 'GET', status: '401' })).toBe(2);
    });
  });

  describe('the dashboard where the queue is opened on demand (a reader-only process)', () => {
    it('opens the queue on the first admitted dashboard request only, answers 503 with Retry-After while it cannot, and tries again', async () => {
      const auth = { authorization: `Bearer ${TOKEN}` };
      let calls = 0;
      let reachable = false;
      const provider = async (): Promise<IngestQueue> => {
        calls++;
        if (!reachable) throw new Error('connect ECONNREFUSED');
        return queue;
      };
      const app = await buildApp(TOKEN, createMetrics({ defaultMetrics: false }), { queue: provider });
      expect(calls).toBe(0);
      // Neither /metrics (queue depth is read with plain Redis) nor a refused request opens it.
      expect((await app.inject({ url: '/metrics', headers: auth })).statusCode).toBe(200);
      expect((await app.inject({ url: '/admin/queues' })).statusCode).toBe(401);
      expect(calls).toBe(0);

      const down = await app.inject({ url: '/admin/queues', headers: auth });
      expect(down.statusCode).toBe(503);
      expect(down.headers['retry-after']).toBe('5');
      expect(down.body).toContain('cannot reach the queue');
      expect(calls).toBe(1);

      reachable = true;
      const page = await app.inject({ url: '/admin/queues', headers: auth });
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-type']).toMatch(/^text\/html/);
      const api = await app.inject({ url: '/admin/queues/api/queues', headers: auth });
      expect(api.json<{ queues: { name: string; counts: Record<string, number> }[] }>().queues[0]).toMatchObject({
        name: 'ingest',
        counts: { waiting: 3, delayed: 1 },
      });
      // What bull-board does not know is the reader's own 404 (problem+json there), not the inner instance's.
      const missing = await app.inject({ url: '/admin/queues/api/no-such-thing', headers: auth });
      expect(missing.statusCode).toBe(404);
      expect(missing.headers['x-oddsfiles-dashboard-outcome']).toBeUndefined();
      expect(missing.json()).toEqual({ notFound: 'the app' });
      // HEAD comes with GET, and the board is built once.
      expect((await app.inject({ method: 'HEAD', url: '/admin/queues', headers: auth })).statusCode).toBe(200);
      expect(calls).toBe(2);
    });
  });

  describe('without ADMIN_TOKEN: loopback only', () => {
    let app: FastifyInstance;
    let proxied: FastifyInstance;
    beforeAll(async () => {
      app = await buildApp(undefined, createMetrics());
      proxied = await buildApp(undefined, createMetrics(), { trustProxy: true });
    });

    for (const url of ['/metrics', '/admin/queues']) {
      it(`${url}: loopback → 200, anything else → 403`, async () => {
        for (const remoteAddress of ['127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1']) {
          expect((await app.inject({ url, remoteAddress })).statusCode, remoteAddress).toBe(200);
        }
        for (const remoteAddress of ['10.1.2.3', '192.168.0.7', '::ffff:10.0.0.1', '2001:db8::1']) {
          const res = await app.inject({ url, remoteAddress });
          expect(res.statusCode, remoteAddress).toBe(403);
          expect(res.headers['content-type']).toBe('application/problem+json');
          // A problem of its own, not the API's "Not allowed for this key": no key is involved.
          expect(res.json()).toMatchObject({
            status: 403,
            type: 'https://oddsfiles.dev/problems/admin-forbidden',
            title: 'Admin access only from loopback or with the admin token',
          });
          expect(res.json<{ title: string }>().title).not.toMatch(/key/i);
          expect(res.json<{ detail: string }>().detail).toMatch(/ADMIN_TOKEN/);
        }
        // A Host that is not a loopback name (DNS rebinding): refused even from loopback.
        expect((await app.inject({ url, headers: { host: 'attacker.example:8080' } })).statusCode).toBe(403);
        expect((await app.inject({ url, headers: { host: '[::1]:8080' } })).statusCode).toBe(200);
        // Behind a trusted proxy on loopback, the client the proxy names decides.
        expect((await proxied.inject({ url, headers: { 'x-forwarded-for': '198.51.100.4' } })).statusCode).toBe(403);
        expect((await proxied.inject({ url, headers: { 'x-forwarded-for': '127.0.0.1' } })).statusCode).toBe(200);
        // ...and a remote client cannot claim to be loopback.
        expect((await proxied.inject({ url, remoteAddress: '198.51.100.4', headers: { 'x-forwarded-for': '127.0.0.1' } })).statusCode).toBe(403);
      });
    }

    it('the pure checks', () => {
      expect(isLoopbackAddress('127.0.0.1')).toBe(true);
      expect(isLoopbackAddress('128.0.0.1')).toBe(false);
      expect(isLoopbackAddress('::2')).toBe(false);
      expect(isLoopbackAddress(undefined)).toBe(false);
      expect(isLoopbackHost('localhost:8080')).toBe(true);
      expect(isLoopbackHost('127.0.0.1')).toBe(true);
      expect(isLoopbackHost('localhost.evil.example')).toBe(false);
      expect(isLoopbackHost('127.0.0.1.nip.io')).toBe(false);
      const facts = {
        method: 'POST',
        authorization: undefined,
        remoteAddress: '127.0.0.1',
        clientIp: '127.0.0.1',
        host: 'localhost:8080',
        secFetchSite: undefined,
      };
      expect(checkAdminAccess(undefined, { ...facts, origin: 'http://localhost:8080' }).ok).toBe(true);
      expect(checkAdminAccess(undefined, { ...facts, origin: 'http://evil.example' })).toMatchObject({ ok: false, reason: 'cross_site' });
      expect(checkAdminAccess(undefined, { ...facts, origin: undefined, secFetchSite: 'same-site' })).toMatchObject({ ok: false, reason: 'cross_site' });
      expect(checkAdminAccess(undefined, { ...facts, method: 'GET', origin: 'http://evil.example' }).ok).toBe(true);
      // Each refusal is a problem of its own (the metrics listener of a worker sends these too).
      const remote = checkAdminAccess(undefined, { ...facts, method: 'GET', origin: undefined, remoteAddress: '10.1.2.3', clientIp: '10.1.2.3' });
      expect(remote.ok || { status: remote.problem.status, code: remote.problem.code, title: remote.problem.title }).toEqual({
        status: 403,
        code: 'http.admin_forbidden',
        title: 'Admin access only from loopback or with the admin token',
      });
      const wrong = checkAdminAccess('the-token', { ...facts, method: 'GET', origin: undefined, authorization: 'Bearer nope' });
      expect(wrong.ok || wrong.problem.title).toBe('Missing or invalid admin token');
    });
  });

  describe('metric values', () => {
    it('names, labels and counts after a known set of events', async () => {
      const metrics = createMetrics({ now: () => NOW });
      const app = await buildApp(undefined, metrics, { withQueue: false });
      metrics.dropSettled({ outcome: 'published', filename: 'site_live_northwind_soccer.json' }, 120, 8);
      metrics.dropSettled({ outcome: 'published', filename: 'site_live_northwind_soccer.json' }, 300, 12);
      metrics.dropSettled({ outcome: 'published', filename: 'site_pregame_redstone_soccer.json' }, 4000, 30);
      metrics.dropSettled({ outcome: 'unchanged', filename: 'site_live_northwind_soccer.json' }, 50, 3);
      metrics.dropSettled({ outcome: 'superseded', filename: 'site_live_northwind_soccer.json' }, 50, 3);
      metrics.dropSettled({ outcome: 'rejected', filename: 'site_live_northwind_soccer.json', reason: 'schema' }, 20, 2);
      metrics.dropSettled({ outcome: 'rejected', filename: 'nope.json', reason: 'unknown_filename' }, 20, 1);
      metrics.dropSettled({ outcome: 'rejected', filename: 'site_live_northwind_soccer.json', reason: 'schema' }, 20, 2);
      metrics.jobSettled({ outcome: 'published', filename: 'site_livepre_oddsport.json', timings: { total: 40 } }, { data: { receivedAt: Date.now() - 1500 } });
      metrics.rateLimited('key');
      metrics.rateLimited('key');
      metrics.rateLimited('auth_failures');
      metrics.authFailed('unknown');
      metrics.authFailed(API_KEY.repeat(2)); // a key-like value never becomes a label
      metrics.httpResponse('/v1/files', 'GET', 200, 1.5);
      metrics.dropChecked('thread');
      metrics.dropChecked('thread');
      metrics.dropChecked('loop');

      await app.inject({ url: '/v1/data/site_live_northwind_soccer.json' });
      await app.inject({ url: '/v1/data/site_pregame_redstone_soccer.json?x=1' });
      await app.inject({ url: '/no/such/thing?token=abc' });
      const text = (await app.inject({ url: '/metrics' })).body;
      const samples = parseExposition(text);

      // Every name is ours.
      expect(samples.every((s) => s.name.startsWith('oddsfiles_'))).toBe(true);
      for (const name of [
        'oddsfiles_drops_total',
        'oddsfiles_rejections_total',
        'oddsfiles_job_duration_seconds_bucket',
        'oddsfiles_publish_lag_seconds_bucket',
        'oddsfiles_http_requests_total',
        'oddsfiles_http_request_duration_seconds_bucket',
        'oddsfiles_rate_limited_total',
        'oddsfiles_auth_failures_total',
        'oddsfiles_process_cpu_seconds_total',
        'oddsfiles_nodejs_eventloop_lag_seconds',
      ]) {
        expect(
          samples.some((s) => s.name === name),
          name,
        ).toBe(true);
      }
      expect(sample(text, 'oddsfiles_drops_total', { outcome: 'published' })).toBe(4);
      expect(sample(text, 'oddsfiles_drop_checks_total', { on: 'thread' })).toBe(2);
      expect(sample(text, 'oddsfiles_drop_checks_total', { on: 'loop' })).toBe(1);
      expect(sample(text, 'oddsfiles_drops_total', { outcome: 'unchanged' })).toBe(1);
      expect(sample(text, 'oddsfiles_drops_total', { outcome: 'superseded' })).toBe(1);
      expect(sample(text, 'oddsfiles_drops_total', { outcome: 'rejected' })).toBe(3);
      expect(sample(text, 'oddsfiles_rejections_total', { reason: 'schema' })).toBe(2);
      expect(sample(text, 'oddsfiles_rejections_total', { reason: 'unknown_filename' })).toBe(1);
      // Reasons that never happened are there at 0 (rate() works from the start).
      expect(sample(text, 'oddsfiles_rejections_total', { reason: 'future_generated_at' })).toBe(0);
      expect(sample(text, 'oddsfiles_job_duration_seconds_count', { outcome: 'published' })).toBe(4);
      expect(sample(text, 'oddsfiles_job_duration_seconds_sum', { outcome: 'rejected' })).toBeCloseTo(0.005, 6);
      // The lag: published drops only, by kind; 0.12 s and 0.3 s fall in le=0.5, 4 s in le=5.
      expect(sample(text, 'oddsfiles_publish_lag_seconds_count', { kind: 'live' })).toBe(2);
      expect(sample(text, 'oddsfiles_publish_lag_seconds_bucket', { kind: 'live', le: '0.25' })).toBe(1);
      expect(sample(text, 'oddsfiles_publish_lag_seconds_bucket', { kind: 'live', le: '0.5' })).toBe(2);
      expect(sample(text, 'oddsfiles_publish_lag_seconds_bucket', { kind: 'pregame', le: '2' })).toBe(0);
      expect(sample(text, 'oddsfiles_publish_lag_seconds_bucket', { kind: 'pregame', le: '5' })).toBe(1);
      expect(sample(text, 'oddsfiles_publish_lag_seconds_count', { kind: 'livepre' })).toBe(1);
      expect(sample(text, 'oddsfiles_publish_lag_seconds_sum', { kind: 'livepre' })).toBeGreaterThanOrEqual(1.5);
      expect(sample(text, 'oddsfiles_rate_limited_total', { scope: 'key' })).toBe(2);
      expect(sample(text, 'oddsfiles_rate_limited_total', { scope: 'auth_failures' })).toBe(1);
      expect(sample(text, 'oddsfiles_auth_failures_total', { reason: 'unknown' })).toBe(1);
      expect(sample(text, 'oddsfiles_auth_failures_total', { reason: 'other' })).toBe(1);
      // HTTP: by route pattern, never the raw URL.
      expect(sample(text, 'oddsfiles_http_requests_total', { route: '/v1/data/:filename', method: 'GET', status: '200' })).toBe(2);
      expect(sample(text, 'oddsfiles_http_requests_total', { route: 'unmatched', method: 'GET', status: '404' })).toBe(1);
      expect(sample(text, 'oddsfiles_http_requests_total', { route: '/v1/files', method: 'GET', status: '200' })).toBe(1);
      expect(text).not.toContain('site_pregame_redstone_soccer.json?x=1');
      expect(text).not.toContain('/no/such/thing');
      expect(text).not.toContain(API_KEY);
    });

    it("freshness per feed, computed at scrape time from the caller's catalog", async () => {
      let clock = NOW;
      const metrics = createMetrics({ defaultMetrics: false, now: () => clock });
      const catalog = new Map<string, CatalogEntry>([
        ['site_live_northwind_soccer.json', entry('site_live_northwind_soccer.json', 'live', 45, 10)],
        ['site_pregame_redstone_soccer.json', entry('site_pregame_redstone_soccer.json', 'pregame', 600, 590)],
        ['site_livepre_oddsport.json', entry('site_livepre_oddsport.json', 'livepre', 5, 4)],
      ]);
      metrics.bindCatalog(() => catalog.values(), { staleAfterMs: baseConfig.staleAfterMs });
      let text = await metrics.render();
      expect(sample(text, 'oddsfiles_feed_age_seconds', { filename: 'site_live_northwind_soccer.json', bookmaker: 'northwind', kind: 'live' })).toBe(45);
      expect(sample(text, 'oddsfiles_feed_published_age_seconds', { filename: 'site_live_northwind_soccer.json' })).toBe(10);
      expect(sample(text, 'oddsfiles_feed_age_seconds', { filename: 'site_pregame_redstone_soccer.json' })).toBe(600);
      expect(sample(text, 'oddsfiles_feed_stale_after_seconds', { kind: 'live' })).toBe(30);
      expect(sample(text, 'oddsfiles_feed_stale_after_seconds', { kind: 'pregame' })).toBe(900);
      expect(sample(text, 'oddsfiles_feeds_stale', { kind: 'live' })).toBe(1);
      expect(sample(text, 'oddsfiles_feeds_stale', { kind: 'pregame' })).toBe(0);
      expect(sample(text, 'oddsfiles_feeds_published', { kind: 'livepre' })).toBe(1);

      // Later, and after a new version of the live feed: the same scrape-time computation.
      clock = NOW + 400_000;
      catalog.set('site_live_northwind_soccer.json', {
        ...entry('site_live_northwind_soccer.json', 'live', 1, 0),
        generatedAtMs: clock - 1000,
        publishedAt: new Date(clock).toISOString(),
      });
      catalog.delete('site_livepre_oddsport.json');
      text = await metrics.render();
      expect(sample(text, 'oddsfiles_feed_age_seconds', { filename: 'site_live_northwind_soccer.json' })).toBe(1);
      expect(sample(text, 'oddsfiles_feed_published_age_seconds', { filename: 'site_live_northwind_soccer.json' })).toBe(0);
      expect(sample(text, 'oddsfiles_feed_age_seconds', { filename: 'site_pregame_redstone_soccer.json' })).toBe(1000);
      expect(sample(text, 'oddsfiles_feeds_stale', { kind: 'pregame' })).toBe(1);
      expect(sample(text, 'oddsfiles_feeds_stale', { kind: 'live' })).toBe(0);
      // A feed that left the catalog leaves no series behind.
      expect(sample(text, 'oddsfiles_feed_age_seconds', { filename: 'site_livepre_oddsport.json' })).toBeUndefined();
    });

    it('queue depth by state and dependency health from Redis at scrape time', async () => {
      const metrics = createMetrics({ defaultMetrics: false });
      metrics.bindQueue(queue);
      metrics.bindProbe('store', async () => {
        throw new Error('store down');
      });
      const text = await metrics.render();
      expect(sample(text, 'oddsfiles_queue_jobs', { queue: 'ingest', state: 'waiting' })).toBe(3);
      expect(sample(text, 'oddsfiles_queue_jobs', { queue: 'ingest', state: 'delayed' })).toBe(1);
      expect(sample(text, 'oddsfiles_queue_jobs', { queue: 'ingest', state: 'active' })).toBe(0);
      expect(sample(text, 'oddsfiles_queue_jobs', { queue: 'ingest', state: 'failed' })).toBe(0);
      expect(sample(text, 'oddsfiles_queue_workers', { queue: 'ingest' })).toBe(0);
      expect(sample(text, 'oddsfiles_dependency_up', { dependency: 'redis' })).toBe(1);
      expect(sample(text, 'oddsfiles_dependency_up', { dependency: 'store' })).toBe(0);

      // One more drop: the next scrape sees it (no caching beyond one scrape).
      await new Promise((r) => setTimeout(r, 1100));
      await queue.add('drop', { name: 'site_live_goldcrest_soccer.json', receivedAt: NOW });
      expect(sample(await metrics.render(), 'oddsfiles_queue_jobs', { queue: 'ingest', state: 'waiting' })).toBe(4);
      await queue.remove((await queue.getJobs(['waiting'])).find((j) => j.data.name === 'site_live_goldcrest_soccer.json')!.id!);
    });

    it('a Redis that does not answer: redis down, no stale queue numbers, the scrape still answers in time', async () => {
      const metrics = createMetrics({ defaultMetrics: false, scrapeTimeoutMs: 200 });
      const hanging = new Promise<never>(() => undefined);
      metrics.bindQueue({ name: 'ingest', getJobCounts: () => hanging, getWorkersCount: () => hanging });
      const t0 = performance.now();
      const text = await metrics.render();
      // Answers (a scrape without its timeout would wait for ever), well within a scrape interval.
      expect(performance.now() - t0).toBeLessThan(10_000);
      expect(sample(text, 'oddsfiles_dependency_up', { dependency: 'redis' })).toBe(0);
      expect(sample(text, 'oddsfiles_queue_jobs', { state: 'waiting' })).toBeUndefined();
    });
  });

  describe('the metrics listener of a worker-only process (METRICS_PORT)', () => {
    it('serves /metrics behind the same guard, /healthz open, problems elsewhere', async () => {
      const metrics = createMetrics({ defaultMetrics: false });
      metrics.bindQueue(queue);
      metrics.dropSettled({ outcome: 'published', filename: 'site_live_northwind_soccer.json' }, 100, 5);
      const log = createLogger({ level: 'trace', destination: sink, pretty: false });
      const server = await startMetricsServer({ metrics, port: 0, host: '127.0.0.1', adminToken: TOKEN, log });
      try {
        const none = await fetch(`${server.url}/metrics`);
        expect(none.status).toBe(401);
        expect(none.headers.get('content-type')).toBe('application/problem+json');
        expect(none.headers.get('www-authenticate')).toMatch(/^Bearer realm="oddsfiles-admin"/);
        expect((await none.json()) as object).toMatchObject({ status: 401 });
        expect((await fetch(`${server.url}/metrics`, { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
        const ok = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}`, 'x-api-key': API_KEY } });
        expect(ok.status).toBe(200);
        expect(ok.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
        const text = await ok.text();
        expect(sample(text, 'oddsfiles_drops_total', { outcome: 'published' })).toBe(1);
        expect(sample(text, 'oddsfiles_queue_jobs', { state: 'waiting' })).toBe(3);
        expect(sample(text, 'oddsfiles_auth_failures_total', { reason: 'admin_token' })).toBe(2);
        expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
        const other = await fetch(`${server.url}/admin/queues`, { headers: { authorization: `Bearer ${TOKEN}` } });
        expect(other.status).toBe(404);
        expect(other.headers.get('content-type')).toBe('application/problem+json');
        expect((await fetch(`${server.url}/metrics`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(405);
        const head = await fetch(`${server.url}/metrics`, { method: 'HEAD', headers: { authorization: `Bearer ${TOKEN}` } });
        expect(head.status).toBe(200);
      } finally {
        await server.close();
      }
      // Without a token: loopback only (this test connects over loopback).
      const open = await startMetricsServer({ metrics, port: 0, host: '127.0.0.1', adminToken: undefined });
      try {
        expect((await fetch(`${open.url}/metrics`)).status).toBe(200);
        expect(await statusWithHost(`${open.url}/metrics`, 'attacker.example')).toBe(403);
        expect(await statusWithHost(`${open.url}/metrics`, 'localhost')).toBe(200);
      } finally {
        await open.close();
      }
    });
  });

  it('no log line ever holds the admin token or an API key (run last: after every request above)', () => {
    expect(logLines.length).toBeGreaterThan(20);
    const all = logLines.join('\n');
    expect(all).not.toContain(TOKEN);
    expect(all).not.toContain(Buffer.from(`ops:${TOKEN}`).toString('base64'));
    expect(all).not.toContain(API_KEY);
    // The refusals are logged, with their reason.
    const refusals = logLines.map((l) => JSON.parse(l) as { msg?: string; reason?: string }).filter((l) => l.msg === 'admin access refused');
    expect(new Set(refusals.map((r) => r.reason))).toEqual(new Set(['missing_token', 'wrong_token', 'not_loopback', 'cross_site']));
  });
});
