/**
 * Rate limits over real HTTP against `oddsfiles start`: two reader processes sharing one limit
 * per key (counted in Redis), the RateLimit headers (old and current IETF draft), 429 with
 * Retry-After as problem+json, the order of checks (401 → 429 → 404 → 403), a plan without a
 * rate, the failed-authentication lockout per client address (trust_proxy: X-Forwarded-For; failing attempts only) on
 * every reader, the metrics; and, in process, fail-open while Redis does not answer.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCatalog } from '../../../src/catalog/redis-catalog.js';
import { createMetrics } from '../../../src/ops/metrics.js';
import { buildReaderApp } from '../../../src/reader/app.js';
import { createReaderState } from '../../../src/reader/state.js';
import { createRedis } from '../../../src/redis/connect.js';
import { drop, tinyDoc } from '../../helpers/drops.js';
import { createReaderFixture, IN_TEST_PRESSURE } from '../../helpers/reader-fixture.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const LIVE = 'site_live_northwind_soccer.json';
const PREGAME = 'site_pregame_northwind_soccer.json';
const UNPUBLISHED = 'site_live_bluewater_tennis.json';

const CONFIG = `
plans:
  free: { allow: ["site_pregame_*"], rate: { max: 5, per: 1m } }
  pro:  { allow: ["*"], rate: { max: 5, per: 1m } }
  open: { allow: ["*"] }
reader:
  trust_proxy: true
  auth_failures: { max: 3, per: 1m }
`;

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

async function get(base: string, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${base}${path}`, { headers });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

function expectProblem(a: Answer, status: number): Record<string, unknown> {
  expect(a.status).toBe(status);
  expect(a.headers.get('content-type')).toBe('application/problem+json');
  const body = JSON.parse(a.body) as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(['detail', 'status', 'title', 'type']);
  expect(body.status).toBe(status);
  return body;
}

describe('rate limits across reader processes', () => {
  const prefix = uniquePrefix('ratelimit');
  let env: Record<string, string>;
  let a: RunningOddsfiles;
  let b: RunningOddsfiles;
  const keys: Record<string, string> = {};
  let n = 0;
  /** A client address of its own for each test (trust_proxy is on): lockouts stay apart. */
  const client = () => ({ 'x-forwarded-for': `198.51.100.${++n}` });

  beforeAll(async () => {
    const dataDir = await makeDataDir('ratelimit');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), CONFIG);
    env = baseEnv(dataDir, prefix);
    a = await startOddsfiles(env);
    const made = await Promise.all(
      ['pro1', 'pro2', 'free', 'open'].map(async (name) => {
        const plan = name.startsWith('pro') ? 'pro' : name;
        const res = await runCli(env, ['keys', 'create', '--name', name, '--plan', plan]);
        expect(res.code, res.stderr).toBe(0);
        return [name, res.stdout.trim()] as const;
      }),
    );
    for (const [name, key] of made) keys[name] = key;
    const inbox = join(dataDir, 'inbox');
    await drop(inbox, LIVE, tinyDoc('northwind', 'soccer', '2026-01-01T00:00:00Z'));
    await drop(inbox, PREGAME, tinyDoc('northwind', 'soccer', '2026-01-01T00:00:00Z'));
    b = await startOddsfiles(env, ['start', '--roles', 'reader']);
    for (const r of [a, b]) {
      await waitFor(
        async () => {
          const res = await get(r.url!, '/v1/files', { 'x-api-key': keys.open!, ...client() });
          return res.status === 200 && (JSON.parse(res.body) as { files: string[] }).files.length === 2;
        },
        20_000,
        'both files listed',
      );
    }
  }, 60_000);

  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    await dropPrefix(prefix);
  });

  it('two readers count one limit per key, with the RateLimit headers of both drafts', async () => {
    const key = keys.pro1!;
    const from = client();
    const remaining: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await get((i % 2 === 0 ? a : b).url!, '/v1/files', { 'x-api-key': key, ...from });
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-limit')).toBe('5');
      expect(res.headers.get('ratelimit-policy')).toBe('"pro";q=5;w=60');
      const left = Number(res.headers.get('ratelimit-remaining'));
      const reset = Number(res.headers.get('ratelimit-reset'));
      expect(reset).toBeGreaterThan(0);
      expect(reset).toBeLessThanOrEqual(60);
      expect(res.headers.get('ratelimit')).toBe(`"pro";r=${left};t=${reset}`);
      remaining.push(left);
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0]);

    for (const r of [b, a]) {
      const over = await get(r.url!, '/v1/files', { 'x-api-key': key, ...from });
      const body = expectProblem(over, 429);
      expect(body.type).toBe('https://oddsfiles.dev/problems/rate-limited');
      const retry = Number(over.headers.get('retry-after'));
      expect(retry).toBeGreaterThan(0);
      expect(retry).toBeLessThanOrEqual(60);
      expect(over.headers.get('ratelimit-remaining')).toBe('0');
      expect(over.headers.get('ratelimit')).toMatch(/^"pro";r=0;t=\d+$/);
      // Retry-After never points before the end of the window the RateLimit field announces.
      expect(retry).toBeGreaterThanOrEqual(Number(/t=(\d+)/.exec(over.headers.get('ratelimit')!)![1]));
    }
    // Another key of the same plan has its own count.
    const other = await get(b.url!, '/v1/files', { 'x-api-key': keys.pro2!, ...from });
    expect(other.status).toBe(200);
    expect(other.headers.get('ratelimit-remaining')).toBe('4');
  });

  it('checks run in order: 401, then 429, then 404, then 403', async () => {
    const key = keys.free!;
    const from = client();
    for (let i = 0; i < 5; i++) expect((await get(a.url!, `/v1/data/${PREGAME}`, { 'x-api-key': key, ...from })).status).toBe(200);
    expectProblem(await get(a.url!, `/v1/data/${UNPUBLISHED}`, { 'x-api-key': key, ...from }), 429); // not 404
    expectProblem(await get(b.url!, `/v1/data/${LIVE}`, { 'x-api-key': key, ...from }), 429); // not 403
    expectProblem(await get(b.url!, '/v1/data/..%2F..%2Fetc%2Fpasswd', { 'x-api-key': key, ...from }), 429);
    expectProblem(await get(a.url!, `/v1/data/${LIVE}`, from), 401); // no key: 401 first
    // A fresh key of the same plan: 404 before 403.
    expectProblem(await get(a.url!, `/v1/data/${UNPUBLISHED}`, { 'x-api-key': keys.pro2!, ...from }), 404);
  });

  it('a plan without a rate is not limited and sends no RateLimit headers', async () => {
    const from = client();
    for (let i = 0; i < 12; i++) {
      const res = await get(i % 2 ? a.url! : b.url!, `/v1/data/${LIVE}`, { 'x-api-key': keys.open!, ...from });
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-limit')).toBeNull();
      expect(res.headers.get('ratelimit')).toBeNull();
    }
  });

  it('a burst of bad keys from one address reaches 429, on every reader; a valid key from it is still served', async () => {
    const from = client();
    const bad = (i: number) => `odf_${String(i).padStart(43, 'x')}`;
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await get((i % 2 ? b : a).url!, '/v1/files', { 'x-api-key': bad(i), ...from });
      statuses.push(res.status);
    }
    expect(statuses).toEqual([401, 401, 401]);
    const locked = await get(b.url!, '/v1/files', { 'x-api-key': bad(9), ...from });
    const body = expectProblem(locked, 429);
    expect(String(body.detail)).toContain('failed authentications');
    const retry = Number(locked.headers.get('retry-after'));
    expect(retry).toBeGreaterThan(0);
    expect(retry).toBeLessThanOrEqual(60);
    // A failed attempt from the locked address: 429 on both readers (the other one heard of the
    // lockout); a valid key from it: served by both.
    for (const r of [b, a]) {
      await waitFor(async () => (await get(r.url!, '/v1/files', { 'x-api-key': bad(10), ...from })).status === 429, 2000, 'the lockout on every reader', 20);
      expect((await get(r.url!, '/v1/files', { 'x-api-key': keys.open!, ...from })).status).toBe(200);
    }
    // Without any key: still the plain 401 (nothing to guess, not counted).
    expectProblem(await get(a.url!, '/v1/files', from), 401);
    // Another address is not affected.
    expect((await get(a.url!, '/v1/files', { 'x-api-key': keys.open!, ...client() })).status).toBe(200);
  });

  it('feeds oddsfiles_rate_limited_total by scope and never logs a key', async () => {
    const text = await (await fetch(`${a.url}/metrics`)).text();
    const count = (scope: string) =>
      [...text.matchAll(new RegExp(`^oddsfiles_rate_limited_total\\{[^}]*scope="${scope}"[^}]*\\} (\\d+)`, 'gm'))].reduce((s, m) => s + Number(m[1]), 0);
    expect(count('key')).toBeGreaterThan(0);
    expect(count('auth_failures')).toBeGreaterThan(0);
    const logs = JSON.stringify([...a.logs, ...b.logs]);
    for (const key of Object.values(keys)) expect(logs).not.toContain(key);
  });
});

describe('Redis does not answer: fail open', () => {
  it('serves with the policy only, lets failures through as 401, warns and counts', async () => {
    const fx = await createReaderFixture('ratelimit-down');
    const dead = createRedis('redis://127.0.0.1:1', 'client', 'dead-limits');
    dead.on('error', () => undefined);
    const subscriber = createRedis(TEST_REDIS_URL, 'subscriber', `${fx.prefix}-sub`);
    subscriber.on('error', () => undefined);
    const metrics = createMetrics({ defaultMetrics: false });
    const state = await createReaderState({
      config: fx.config,
      redis: fx.redis,
      subscriber,
      store: fx.store,
      catalog: createCatalog(fx.redis, fx.keys),
      log: fx.log,
      registry: fx.registry,
    });
    const app = await buildReaderApp({
      config: fx.config,
      redis: fx.redis,
      store: fx.store,
      log: fx.log,
      state,
      limits: { redis: dead, metrics },
      pressure: IN_TEST_PRESSURE,
    });
    try {
      const { key } = await fx.keyStore.create({ name: 'pro', plan: 'pro' });
      await state.refresh();
      for (let i = 0; i < 3; i++) {
        const res = await app.inject({ url: '/v1/files', headers: { 'x-api-key': key } });
        expect(res.statusCode).toBe(200);
        expect(res.headers['ratelimit-policy']).toBe('"pro";q=600;w=60');
        expect(res.headers['ratelimit-remaining']).toBeUndefined();
      }
      for (let i = 0; i < 25; i++) {
        expect((await app.inject({ url: '/v1/files', headers: { 'x-api-key': `odf_${'q'.repeat(43)}` } })).statusCode).toBe(401);
      }
      const warnings = fx.logLines.filter((l) => l.includes('rate limits cannot be checked'));
      expect(warnings.length).toBe(1); // at most one every 10 s
      expect(await metrics.render()).toMatch(/oddsfiles_rate_limit_unavailable_total\{scope="key"\} 3/);
      expect(await metrics.render()).toMatch(/oddsfiles_rate_limit_unavailable_total\{scope="auth_failures"\} 25/);
    } finally {
      await app.close();
      await state.close();
      dead.disconnect();
      subscriber.disconnect();
      await fx.cleanup();
    }
  });
});
