/** API keys: the Redis key store, allow patterns, the in-memory ring, and the `keys` commands. */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Command, CommanderError } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCliContext, type CliContext } from '../../src/cli/context.js';
import { registerKeysCommands } from '../../src/cli/keys.js';
import { loadConfig, type Config } from '../../src/config.js';
import { NotFoundError, UsageError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { compilePatterns, effectiveAllow, patternProblem } from '../../src/keys/patterns.js';
import { createKeyRing } from '../../src/keys/ring.js';
import { hashApiKey, scrubKeys } from '../../src/keys/secret.js';
import { createKeyStore, KeyNameTakenError, type KeyStore } from '../../src/keys/store.js';
import { createRedis } from '../../src/redis/connect.js';
import { redisKeys, type RedisKeys } from '../../src/redis/key-names.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import type { Redis } from 'ioredis';

let prefix: string;
let dir: string;
let config: Config;
let redis: Redis;
let keys: RedisKeys;
let store: KeyStore;
const silent = createLogger({ level: 'silent', pretty: false, destination: new Writable({ write: (_c, _e, cb) => cb() }) });

beforeAll(async () => {
  prefix = uniquePrefix('keys');
  dir = await mkdtemp(join(tmpdir(), 'oddsfiles-keys-'));
  config = loadConfig({ env: { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix, DATA_DIR: dir }, cwd: dir });
  redis = createRedis(TEST_REDIS_URL, 'client', 'keys-test');
  redis.on('error', () => undefined);
  if (redis.status !== 'ready') await new Promise((r) => redis.once('ready', r));
  keys = redisKeys(prefix);
  store = createKeyStore({ redis, keys, plans: config.plans });
});

afterAll(async () => {
  redis?.disconnect();
  await dropPrefix(prefix);
  await rm(dir, { recursive: true, force: true });
});

describe('allow patterns', () => {
  it('* matches any run of characters; everything else matches itself', () => {
    const m = compilePatterns(['site_pregame_*']);
    expect(m('site_pregame_northwind_soccer.json')).toBe(true);
    expect(m('site_live_northwind_soccer.json')).toBe(false);
    expect(m('xsite_pregame_a.json')).toBe(false);
    const dot = compilePatterns(['site_live_a.json']);
    expect(dot('site_live_a.json')).toBe(true);
    expect(dot('site_live_aXjson')).toBe(false);
    expect(compilePatterns(['*'])('anything')).toBe(true);
    expect(compilePatterns([])('site_live_a.json')).toBe(false);
    const two = compilePatterns(['site_live_*_soccer.json', 'site_livepre_*']);
    expect(two('site_live_northwind_soccer.json')).toBe(true);
    expect(two('site_livepre_oddsport.json')).toBe(true);
    expect(two('site_live_northwind_tennis.json')).toBe(false);
  });

  it('refuses patterns with other characters', () => {
    expect(patternProblem('site_*')).toBeUndefined();
    for (const bad of ['', 'a/b', 'a?', '[ab]', '{a,b}', 'a b', '../x', 'x'.repeat(200)]) {
      expect(patternProblem(bad), bad).toBeDefined();
    }
  });

  it("a key's allow-list is its own patterns plus its plan's", () => {
    expect(effectiveAllow({ plan: 'free', allow: ['site_live_x*'] }, config.plans)).toEqual(['site_live_x*', 'site_pregame_*']);
    expect(effectiveAllow({ plan: null, allow: ['a*'] }, config.plans)).toEqual(['a*']);
    expect(effectiveAllow({ plan: 'gone', allow: [] }, config.plans)).toEqual([]);
  });
});

describe('key store', () => {
  it('creates a high-entropy key and stores only its hash', async () => {
    const { key, record } = await store.create({ name: 'alice', plan: 'free', allow: ['site_live_northwind_*'] });
    expect(key).toMatch(/^odf_[A-Za-z0-9_-]{43}$/);
    expect(record).toMatchObject({ name: 'alice', plan: 'free', allow: ['site_live_northwind_*'], revoked_at: null });
    expect(record.id).toMatch(/^key_[0-9a-f]{12}$/);
    expect(Date.parse(record.created_at)).toBeGreaterThan(0);
    const hashes = await redis.hgetall(keys.apiKeyHashes);
    expect(hashes[hashApiKey(key).toString('hex')]).toBe(record.id);
    const dump = JSON.stringify([await redis.hgetall(keys.apiKeys), hashes]);
    expect(dump).not.toContain(key);
    expect(dump).not.toContain(key.slice(4));
    const other = await store.create({ name: 'bob' });
    expect(other.key).not.toBe(key);
  });

  it('verifies keys', async () => {
    const { key, record } = await store.create({ name: 'carol', plan: 'pro' });
    expect((await store.verify(key))?.id).toBe(record.id);
    expect(await store.verify(`odf_${'x'.repeat(43)}`)).toBeUndefined();
    await store.revoke(record.id);
    expect(await store.verify(key)).toBeUndefined();
  });

  it('refuses an unknown plan, a bad pattern, an empty name', async () => {
    await expect(store.create({ name: 'dave', plan: 'platinum' })).rejects.toBeInstanceOf(UsageError);
    await expect(store.create({ name: 'dave', allow: ['a/b'] })).rejects.toBeInstanceOf(UsageError);
    await expect(store.create({ name: '  ' })).rejects.toBeInstanceOf(UsageError);
    await expect(store.create({ name: 'key_0123456789ab' })).rejects.toBeInstanceOf(UsageError);
  });

  it('names are unique among keys that are not revoked', async () => {
    await store.create({ name: 'erin', plan: 'free' });
    await expect(store.create({ name: 'erin', plan: 'pro' })).rejects.toBeInstanceOf(KeyNameTakenError);
    await store.revoke('erin');
    const again = await store.create({ name: 'erin', plan: 'pro' });
    expect(again.record.plan).toBe('pro');
    // Two at once: one wins.
    const results = await Promise.allSettled([store.create({ name: 'frank' }), store.create({ name: 'frank' })]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
  });

  it('lists records, never keys', async () => {
    const { key } = await store.create({ name: 'grace', plan: 'pro' });
    const list = await store.list();
    expect(list.map((r) => r.name)).toContain('grace');
    expect(JSON.stringify(list)).not.toContain(key);
    for (const r of list) expect(Object.keys(r).sort()).toEqual(['allow', 'created_at', 'id', 'name', 'plan', 'publish', 'revoked_at']);
    const sorted = [...list].sort((x, y) => x.created_at.localeCompare(y.created_at) || x.id.localeCompare(y.id));
    expect(list).toEqual(sorted);
  });

  it('revokes by id or name, announces it, and is idempotent', async () => {
    const sub = createRedis(TEST_REDIS_URL, 'subscriber', 'keys-test-sub');
    sub.on('error', () => undefined);
    const messages: string[] = [];
    sub.on('message', (_ch, m) => messages.push(m));
    await sub.subscribe(keys.apiKeysChannel);
    try {
      const { record } = await store.create({ name: 'heidi', plan: 'pro' });
      const byName = await store.revoke('heidi');
      expect(byName.alreadyRevoked).toBe(false);
      expect(byName.record.id).toBe(record.id);
      expect(Date.parse(byName.record.revoked_at!)).toBeGreaterThan(0);
      const byId = await store.revoke(record.id);
      expect(byId.alreadyRevoked).toBe(true);
      expect(byId.record.revoked_at).toBe(byName.record.revoked_at);
      await expect(store.revoke('nobody')).rejects.toBeInstanceOf(NotFoundError);
      await new Promise((r) => setTimeout(r, 100));
      expect(messages.map((m) => JSON.parse(m))).toEqual([
        { op: 'create', id: record.id },
        { op: 'revoke', id: record.id, revoked_at: byName.record.revoked_at },
      ]);
    } finally {
      sub.disconnect();
    }
  });
});

describe('key ring (the reader’s copy)', () => {
  it('authenticates valid keys, refuses revoked and unknown ones, applies its plan', async () => {
    const ring = createKeyRing({ source: store, plans: config.plans, log: silent });
    const { key, record } = await store.create({ name: 'ivan', plan: 'free', allow: ['site_livepre_*'] });
    await ring.reload();
    const p = ring.authenticate(key)!;
    expect(p.id).toBe(record.id);
    expect(p.allows('site_pregame_a_soccer.json')).toBe(true);
    expect(p.allows('site_livepre_oddsport.json')).toBe(true);
    expect(p.allows('site_live_a_soccer.json')).toBe(false);
    expect(ring.authenticate(undefined)).toBeUndefined();
    expect(ring.authenticate(['a', 'b'])).toBeUndefined();
    expect(ring.authenticate(`odf_${'y'.repeat(43)}`)).toBeUndefined();
    const { record: revoked } = await store.revoke('ivan');
    // The announcement alone revokes at once, before any reload finishes.
    ring.handleMessage(JSON.stringify({ op: 'revoke', id: revoked.id, revoked_at: revoked.revoked_at }));
    expect(ring.authenticate(key)).toBeUndefined();
  });
});

describe('key ring through a Redis that lost its data', () => {
  it('keeps the keys it holds while Redis has none, and takes the restored set on the next reload', async () => {
    const own = uniquePrefix('keys-lost');
    const ownKeys = redisKeys(own);
    const lostStore = createKeyStore({ redis, keys: ownKeys, plans: config.plans });
    const ring = createKeyRing({ source: lostStore, plans: config.plans, log: silent });
    try {
      const { key } = await lostStore.create({ name: 'kept', plan: 'free', allow: ['*'] });
      const { key: other, record: otherRecord } = await lostStore.create({ name: 'revoked-later', plan: 'free', allow: ['*'] });
      await ring.reload();
      expect(ring.authenticate(key)).toBeDefined();
      // Redis loses everything: the held keys still authenticate…
      await dropPrefix(own);
      await ring.reload();
      expect(ring.authenticate(key)).toBeDefined();
      expect(ring.authenticate(other)).toBeDefined();
      // …and a revocation announced meanwhile still holds.
      ring.handleMessage(JSON.stringify({ op: 'revoke', id: otherRecord.id, revoked_at: new Date().toISOString() }));
      await ring.reload();
      expect(ring.authenticate(other)).toBeUndefined();
      // Once Redis holds keys again (here: another one only), the ring is that set.
      const { key: fresh } = await lostStore.create({ name: 'after', plan: 'free', allow: ['*'] });
      await ring.reload();
      expect(ring.authenticate(fresh)).toBeDefined();
      expect(ring.authenticate(key)).toBeUndefined();
    } finally {
      await dropPrefix(own);
    }
  });
});

describe('publisher keys', () => {
  it('a key publishes the names its --publish patterns match and nothing else, at its plan’s publish_rate or publish.rate', async () => {
    const plans = { ...config.plans, feed: { name: 'feed', allow: [], rate: undefined, publishRate: { max: 5, perMs: 1000 }, streams: undefined } };
    const pstore = createKeyStore({ redis, keys, plans });
    const ring = createKeyRing({ source: pstore, plans, log: silent, publishRate: { max: 7, perMs: 60_000 } });
    let loads = 0;
    ring.onLoaded(() => loads++);
    const only = await pstore.create({ name: 'pub-only', publish: ['site_*_northwind*', 'site_livepre_oddsport.json'] });
    const both = await pstore.create({ name: 'pub-both', plan: 'feed', allow: ['site_live_*'], publish: ['site_live_bluewater_*'] });
    const reader = await pstore.create({ name: 'pub-none', plan: 'pro' });
    expect(only.record.publish).toEqual(['site_*_northwind*', 'site_livepre_oddsport.json']);
    await ring.reload();
    const p = ring.authenticate(only.key)!;
    expect(p.allows('site_live_northwind_soccer.json')).toBe(false); // reads nothing
    expect(p.publisher!.allows('site_live_northwind_soccer.json')).toBe(true);
    expect(p.publisher!.allows('site_pregame_northwind_tennis.json')).toBe(true);
    expect(p.publisher!.allows('site_livepre_oddsport.json')).toBe(true);
    expect(p.publisher!.allows('site_live_bluewater_soccer.json')).toBe(false);
    expect(p.publisher!.rate).toEqual({ max: 7, perMs: 60_000 });
    expect(p.publisher!.rateKey).not.toBe(p.rateKey);
    const b = ring.authenticate(both.key)!;
    expect(b.allows('site_live_redstone_soccer.json')).toBe(true);
    expect(b.publisher!.allows('site_live_redstone_soccer.json')).toBe(false);
    expect(b.publisher!.allows('site_live_bluewater_tennis.json')).toBe(true);
    expect(b.publisher!.rate).toEqual({ max: 5, perMs: 1000 });
    expect(ring.authenticate(reader.key)!.publisher).toBeUndefined();
    expect(ring.publishers).toBe(2);
    await expect(pstore.create({ name: 'pub-bad', publish: ['../x'] })).rejects.toThrow(UsageError);
    // Revoked the same way: the publisher side goes with the key.
    await pstore.revoke('pub-only');
    await ring.reload();
    expect(ring.authenticate(only.key)).toBeUndefined();
    expect(ring.publishers).toBe(1);
    expect(loads).toBe(2);
    await pstore.revoke('pub-both');
  });

  it('a record stored before publisher keys existed reads as publishing nothing', async () => {
    const id = 'key_0123456789ab';
    await redis.hset(keys.apiKeys, id, JSON.stringify({ id, name: 'old', plan: 'pro', allow: [], created_at: new Date().toISOString(), revoked_at: null }));
    expect((await store.list()).find((r) => r.id === id)?.publish).toEqual([]);
    await redis.hdel(keys.apiKeys, id);
  });
});

describe('oddsfiles keys (CLI)', () => {
  const run = async (argv: string[], extraEnv: Record<string, string> = {}) => {
    let out = '';
    let err = '';
    const io = {
      stdout: new Writable({ write: (c: Buffer, _e, cb) => ((out += c.toString()), cb()) }),
      stderr: new Writable({ write: (c: Buffer, _e, cb) => ((err += c.toString()), cb()) }),
    };
    const ctx: CliContext = createCliContext(io, { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix, DATA_DIR: dir, ...extraEnv }, dir);
    const program = new Command('oddsfiles').exitOverride().configureOutput({ writeOut: () => undefined, writeErr: () => undefined });
    registerKeysCommands(program, ctx);
    program.commands.forEach(function inherit(c: Command) {
      c.exitOverride();
      c.configureOutput({ writeOut: () => undefined, writeErr: () => undefined });
      c.commands.forEach(inherit);
    });
    try {
      await program.parseAsync(argv, { from: 'user' });
      return { out, err, error: undefined as unknown };
    } catch (error) {
      return { out, err, error };
    } finally {
      await ctx.close();
    }
  };

  it('create prints the key alone on stdout', async () => {
    const r = await run(['keys', 'create', '--name', 'judy', '--plan', 'free', '--allow', 'site_live_*', '--allow', 'site_livepre_*']);
    expect(r.error).toBeUndefined();
    expect(r.out).toMatch(/^odf_[A-Za-z0-9_-]{43}\n$/);
    expect(r.err).toContain('not shown again');
    const key = r.out.trim();
    const record = await store.verify(key);
    expect(record).toMatchObject({ name: 'judy', plan: 'free', allow: ['site_live_*', 'site_livepre_*'] });
  });

  it('create: bad usage is a UsageError (exit 2), a missing --name a commander error', async () => {
    expect((await run(['keys', 'create', '--name', 'kim', '--plan', 'nope'])).error).toBeInstanceOf(UsageError);
    expect((await run(['keys', 'create', '--name', 'kim', '--allow', 'a?b'])).error).toBeInstanceOf(UsageError);
    expect((await run(['keys', 'create'])).error).toBeInstanceOf(CommanderError);
  });

  it('list shows the table and --json, never a key', async () => {
    const created = await run(['keys', 'create', '--name', 'leo', '--plan', 'pro']);
    const key = created.out.trim();
    const table = await run(['keys', 'list']);
    expect(table.out.split('\n')[0]).toMatch(/^ID\s+NAME\s+PLAN\s+ALLOW\s+PUBLISH\s+CREATED\s+REVOKED$/);
    expect(table.out).toMatch(/key_[0-9a-f]{12}\s+leo\s+pro\s+\*\s+-\s+\S+\s+-/);
    expect(table.out).not.toContain(key);
    const json = await run(['keys', 'list', '--json']);
    const list = JSON.parse(json.out) as { name: string; effective_allow: string[] }[];
    expect(list.find((k) => k.name === 'leo')?.effective_allow).toEqual(['*']);
    expect(json.out).not.toContain(key);
  });

  it('list marks a plan the configuration no longer has, and says so on stderr', async () => {
    await run(['keys', 'create', '--name', 'ned', '--plan', 'pro']);
    const config = join(dir, 'free-only.yaml');
    await writeFile(config, 'plans:\n  free: { allow: ["site_pregame_*"], rate: { max: 30, per: 1m } }\n');
    const table = await run(['keys', 'list'], { ODDSFILES_CONFIG: config });
    expect(table.error).toBeUndefined();
    expect(table.out).toMatch(/key_[0-9a-f]{12}\s+ned\s+pro \(not configured\)\s+-\s/);
    expect(table.err).toMatch(/active key\(s\) name a plan that is not configured \(pro\)/);
    const json = JSON.parse((await run(['keys', 'list', '--json'], { ODDSFILES_CONFIG: config })).out) as { name: string; plan_configured: boolean }[];
    expect(json.find((k) => k.name === 'ned')?.plan_configured).toBe(false);
    const normal = await run(['keys', 'list']);
    expect(normal.out).toMatch(/ned\s+pro\s+\*\s/);
    expect(normal.err).toBe('');
  });

  it('revoke by name or id; unknown is NotFoundError (exit 1)', async () => {
    await run(['keys', 'create', '--name', 'mia', '--plan', 'pro']);
    const r = await run(['keys', 'revoke', 'mia']);
    expect(r.error).toBeUndefined();
    expect(r.out).toMatch(/^revoked key_[0-9a-f]{12} \(mia\) at /);
    const id = /key_[0-9a-f]{12}/.exec(r.out)![0];
    expect((await run(['keys', 'revoke', id])).out).toContain('already revoked');
    expect((await run(['keys', 'revoke', 'nobody-at-all'])).error).toBeInstanceOf(NotFoundError);
  });
});

describe('secrets', () => {
  it('scrubs anything key-shaped from text', () => {
    expect(scrubKeys(`/v1/data/x?k=odf_${'Z'.repeat(43)}&y=1`)).toBe('/v1/data/x?k=odf_[redacted]&y=1');
    expect(scrubKeys('/v1/files')).toBe('/v1/files');
  });
});
