/**
 * Plan limits with leased tokens, against the real Redis (a unique prefix): two readers in this
 * process, each with its own Redis connections, counting one key. Across both, exactly `max`
 * requests per window are allowed, with the RateLimit headers and Retry-After on 429; a plan with
 * a high limit costs a handful of Redis commands, not one per request (counted with MONITOR); the
 * Lua script's arithmetic and TTL; a new window after the old one ends.
 */
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCatalog } from '../../src/catalog/redis-catalog.js';
import type { Config, Plan } from '../../src/config.js';
import { createKeyStore } from '../../src/keys/store.js';
import { buildReaderApp } from '../../src/reader/app.js';
import { redisLease } from '../../src/reader/limits/lease-script.js';
import { createReaderState, type ReaderState } from '../../src/reader/state.js';
import { createRedis } from '../../src/redis/connect.js';
import { createReaderFixture, IN_TEST_PRESSURE, type ReaderFixture } from '../helpers/reader-fixture.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';

interface Reader {
  readonly app: FastifyInstance;
  readonly state: ReaderState;
  readonly connections: Redis[];
}

describe('plan limits leased from Redis, two readers', () => {
  let fx: ReaderFixture;
  let config: Config;
  let a: Reader;
  let b: Reader;
  const keys: Record<string, string> = {};
  const ids: Record<string, string> = {};

  const connect = async (role: 'client' | 'subscriber', name: string): Promise<Redis> => {
    const c = createRedis(TEST_REDIS_URL, role, `${fx.prefix}-${name}`);
    c.on('error', () => undefined);
    if (c.status !== 'ready') await new Promise((r) => c.once('ready', r));
    return c;
  };

  const startReader = async (name: string): Promise<Reader> => {
    const client = await connect('client', `${name}-client`);
    const subscriber = await connect('subscriber', `${name}-sub`);
    const limits = await connect('client', `${name}-limits`);
    const state = await createReaderState({
      config,
      redis: client,
      subscriber,
      store: fx.store,
      catalog: createCatalog(client, fx.keys),
      log: fx.log,
      registry: fx.registry,
    });
    const app = await buildReaderApp({
      config,
      redis: client,
      store: fx.store,
      log: fx.log,
      state,
      limits: { redis: limits, subscriber },
      pressure: IN_TEST_PRESSURE,
    });
    await state.refresh();
    return { app, state, connections: [client, subscriber, limits] };
  };

  const get = (r: Reader, key: string) => r.app.inject({ url: '/v1/files', headers: { 'x-api-key': key } });

  beforeAll(async () => {
    fx = await createReaderFixture('ratelimit-lease');
    const plan = (name: string, max: number, perMs: number): Plan => ({ name, allow: ['*'], rate: { max, perMs }, streams: undefined });
    config = {
      ...fx.config,
      plans: { ...fx.config.plans, tight: plan('tight', 40, 60_000), tiny: plan('tiny', 3, 1500), huge: plan('huge', 1_000_000, 60_000) },
    };
    const store = createKeyStore({ redis: fx.redis, keys: fx.keys, plans: config.plans });
    for (const plan of ['tight', 'tiny', 'huge']) {
      const made = await store.create({ name: plan, plan });
      keys[plan] = made.key;
      ids[plan] = made.record.id;
    }
    a = await startReader('a');
    b = await startReader('b');
  }, 30_000);

  afterAll(async () => {
    for (const r of [a, b]) {
      if (!r) continue;
      await r.app.close();
      await r.state.close();
      for (const c of r.connections) c.disconnect();
    }
    await fx?.cleanup();
  });

  it('across both readers exactly max requests are allowed per window, with the headers', async () => {
    const key = keys.tight!;
    // 120 requests at once, half on each reader.
    const answers = await Promise.all(Array.from({ length: 120 }, (_, i) => get(i % 2 ? b : a, key)));
    const ok = answers.filter((r) => r.statusCode === 200);
    const over = answers.filter((r) => r.statusCode === 429);
    expect(ok.length).toBe(40);
    expect(over.length).toBe(80);
    // Each allowed request had a token of its own: Remaining names it, 39 down to 0, once each.
    const remaining = ok.map((r) => Number(r.headers['ratelimit-remaining'])).sort((x, y) => y - x);
    expect(remaining).toEqual(Array.from({ length: 40 }, (_, i) => 39 - i));
    for (const r of ok) {
      expect(r.headers['ratelimit-limit']).toBe('40');
      expect(r.headers['ratelimit-policy']).toBe('"tight";q=40;w=60');
      const reset = Number(r.headers['ratelimit-reset']);
      expect(reset).toBeGreaterThan(0);
      expect(reset).toBeLessThanOrEqual(60);
      expect(r.headers.ratelimit).toBe(`"tight";r=${r.headers['ratelimit-remaining']};t=${reset}`);
    }
    for (const r of over) {
      expect(r.headers['content-type']).toBe('application/problem+json');
      expect(JSON.parse(r.body).type).toBe('https://oddsfiles.dev/problems/rate-limited');
      const retry = Number(r.headers['retry-after']);
      expect(retry).toBeGreaterThan(0);
      expect(retry).toBeLessThanOrEqual(60);
      expect(r.headers['ratelimit-remaining']).toBe('0');
      expect(r.headers.ratelimit).toBe(`"tight";r=0;t=${r.headers['ratelimit-reset']}`);
      expect(retry).toBeGreaterThanOrEqual(Number(r.headers['ratelimit-reset']));
    }
    // Later requests, on either reader, stay refused.
    for (const r of [a, b, a, b]) expect((await get(r, key)).statusCode).toBe(429);
  });

  it('a high limit costs a few Redis commands, not one per request', async () => {
    const key = keys.huge!;
    const counterKey = `${fx.prefix}:rate:`;
    const monitor = await fx.redis.monitor();
    let leases = 0;
    let others = 0;
    monitor.on('monitor', (_time: string, args: string[]) => {
      const cmd = String(args[0]).toLowerCase();
      if (!args.some((x) => String(x).startsWith(counterKey))) return;
      if (cmd === 'evalsha' || cmd === 'eval') leases++;
      else if (cmd !== 'incrby' && cmd !== 'pttl' && cmd !== 'pexpire') others++; // those run inside the script
    });
    try {
      const requests = 2000;
      let allowed = 0;
      for (let i = 0; i < requests; i += 40) {
        const batch = await Promise.all(Array.from({ length: 40 }, (_, j) => get((i + j) % 2 ? b : a, key)));
        for (const r of batch) if (r.statusCode === 200) allowed++;
      }
      expect(allowed).toBe(requests);
      // MONITOR reports asynchronously: let the last lines arrive.
      await new Promise((r) => setTimeout(r, 200));
      expect(leases).toBeGreaterThanOrEqual(2); // one block per reader at least
      expect(leases).toBeLessThan(requests / 10);
      expect(others).toBe(0);
      // The counter holds what was served plus what the two readers still hold: at most a block each.
      const total = Number(await fx.redis.get(`${fx.prefix}:rate:key:${ids.huge}`));
      expect(total).toBeGreaterThanOrEqual(requests);
      expect(total).toBeLessThanOrEqual(requests + 2 * 1000);
    } finally {
      monitor.disconnect();
    }
  });

  it('a new window starts when the old one ends', async () => {
    const key = keys.tiny!;
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await get(i % 2 ? b : a, key)).statusCode);
    expect(statuses).toEqual([200, 200, 200, 429]);
    const refused = await get(a, key);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(2);
    await new Promise((r) => setTimeout(r, 1600));
    const again = await get(b, key);
    expect(again.statusCode).toBe(200);
    expect(again.headers['ratelimit-remaining']).toBe('2');
    expect((await get(a, key)).headers['ratelimit-remaining']).toBe('1');
  });
});

describe('the lease script', () => {
  it('adds n, sets the window on a new key, and answers the total and the time left', async () => {
    const fx = await createReaderFixture('lease-script');
    try {
      const lease = redisLease(fx.redis, `${fx.prefix}:rate:`);
      const first = await lease('key:x', 5, 10_000);
      expect(first).toEqual({ total: 5, ttlMs: 10_000 });
      const second = await lease('key:x', 3, 10_000);
      expect(second.total).toBe(8);
      expect(second.ttlMs).toBeGreaterThan(9000);
      expect(second.ttlMs).toBeLessThanOrEqual(10_000);
      expect(Number(await fx.redis.get(`${fx.prefix}:rate:key:x`))).toBe(8);
      // A counter that lost its TTL gets one back (it would otherwise never end).
      await fx.redis.set(`${fx.prefix}:rate:key:y`, '7');
      expect(await lease('key:y', 1, 5000)).toEqual({ total: 8, ttlMs: 5000 });
      expect(await fx.redis.pttl(`${fx.prefix}:rate:key:y`)).toBeGreaterThan(4000);
      // Defined once per connection, whoever asks.
      expect(await redisLease(fx.redis, `${fx.prefix}:rate:`)('key:x', 1, 10_000)).toMatchObject({ total: 9 });
    } finally {
      await fx.cleanup();
    }
  });
});
