/**
 * The reader keeps current: new versions within a second, revocations within a second in every
 * reader process, never a regression, the safety-net refresh, the manifest when Redis is away.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { CatalogEntry } from '../../src/catalog/types.js';
import type { Store } from '../../src/store/store.js';
import { objectKey } from '../../src/store/store.js';
import { createReaderFixture, IN_TEST_PRESSURE, oddsDocument, within, type ReaderFixture, type ReaderInstance } from '../helpers/reader-fixture.js';

const FILE = 'site_live_redstone_basketball.json';
const OTHER = 'site_pregame_goldcrest_tennis.json';

let fx: ReaderFixture;
let a: ReaderInstance;
let b: ReaderInstance;
let proKey: string;

/**
 * How long an announced change may take to be served: generous, since the test worker may be
 * starved of CPU on a busy machine. Whether it came by announcement or by the re-read every
 * second is not told apart here; the re-read has its own test below.
 */
const PROMPTLY = 5000;

const fetchFrom = (r: ReaderInstance, url: string, key = proKey, headers: Record<string, string> = {}) =>
  r.app.inject({ url, headers: { 'x-api-key': key, ...headers } });

beforeAll(async () => {
  fx = await createReaderFixture('reader-live', { refreshMs: 1000 });
  await fx.publish(FILE, oddsDocument('redstone', 'basketball', 5000, 1));
  await fx.publish(OTHER, oddsDocument('goldcrest', 'tennis', 5000, 2));
  proKey = (await fx.keyStore.create({ name: 'pro', plan: 'pro' })).key;
  a = await fx.start();
  b = await fx.start();
  await Promise.all([a.state.ready, b.state.ready]);
});

afterAll(async () => {
  await fx?.cleanup();
});

describe('two reader processes against one Redis and store', () => {
  it('serve the same list and the same bytes', async () => {
    const [la, lb] = await Promise.all([fetchFrom(a, '/v1/files'), fetchFrom(b, '/v1/files')]);
    expect(la.json()).toEqual({ files: [FILE, OTHER].sort() });
    expect(lb.body).toBe(la.body);
    const [da, db] = await Promise.all([fetchFrom(a, `/v1/data/${FILE}`), fetchFrom(b, `/v1/data/${FILE}`)]);
    expect(da.statusCode).toBe(200);
    expect(db.rawPayload.equals(da.rawPayload)).toBe(true);
    expect(db.headers.etag).toBe(da.headers.etag);
  });

  it('a new version is served by both promptly after its commit', async () => {
    const doc = Buffer.from(JSON.stringify(oddsDocument('redstone', 'basketball', 6000, 3)));
    const entry = await fx.publish(FILE, doc);
    const etag = `"${entry.sha256.slice(0, 32)}"`;
    const elapsed = await Promise.all([a, b].map((r) => within(PROMPTLY, async () => (await fetchFrom(r, `/v1/data/${FILE}`)).headers.etag === etag)));
    expect(Math.max(...elapsed)).toBeLessThan(PROMPTLY);
    const res = await fetchFrom(b, `/v1/data/${FILE}`);
    expect(res.rawPayload.equals(doc)).toBe(true);
  });

  it('a file published for the first time appears in the list promptly', async () => {
    const name = 'site_livepre_oddsport.json';
    await fx.publish(name, { bookmaker: 'oddsport', events: [] });
    for (const r of [a, b]) {
      await within(PROMPTLY, async () => ((await fetchFrom(r, '/v1/files')).json() as { files: string[] }).files.includes(name));
    }
  });

  it('a revoked key is refused by both promptly', async () => {
    const { key } = await fx.keyStore.create({ name: 'soon-gone', plan: 'pro' });
    await within(PROMPTLY, async () => (await fetchFrom(a, '/v1/files', key)).statusCode === 200 && (await fetchFrom(b, '/v1/files', key)).statusCode === 200);
    await fx.keyStore.revoke('soon-gone');
    const elapsed = await Promise.all([a, b].map((r) => within(PROMPTLY, async () => (await fetchFrom(r, '/v1/files', key)).statusCode === 401, 5)));
    expect(Math.max(...elapsed)).toBeLessThan(PROMPTLY);
    // And it stays refused after the periodic reload.
    await a.state.refresh();
    expect((await fetchFrom(a, `/v1/data/${FILE}`, key)).statusCode).toBe(401);
  });
});

describe('never regress', () => {
  const announce = (entry: CatalogEntry, seq: number) => fx.redis.publish(fx.keys.catalogChannel, JSON.stringify({ seq, entry }));

  it('ignores an announcement of an older version', async () => {
    const current = (await fx.catalog.get(FILE))!;
    const oldBytes = Buffer.from('{"old":true}');
    const { createHash } = await import('node:crypto');
    const sha = createHash('sha256').update(oldBytes).digest('hex');
    await fx.store.put(objectKey(FILE, sha), oldBytes);
    const older: CatalogEntry = { ...current, sha256: sha, object: objectKey(FILE, sha), size: oldBytes.length, generatedAtMs: current.generatedAtMs - 10_000 };
    await announce(older, 10_000);
    await new Promise((r) => setTimeout(r, 300));
    await a.state.published.idle();
    expect((await fetchFrom(a, `/v1/data/${FILE}`)).headers.etag).toBe(`"${current.sha256.slice(0, 32)}"`);
  });

  it('keeps serving the held version while a newer one cannot be loaded', async () => {
    const current = (await fx.catalog.get(FILE))!;
    const missing = 'f'.repeat(64);
    const newer: CatalogEntry = { ...current, sha256: missing, object: objectKey(FILE, missing), generatedAtMs: current.generatedAtMs + 1 };
    await announce(newer, 20_000);
    await new Promise((r) => setTimeout(r, 300));
    const res = await fetchFrom(a, `/v1/data/${FILE}`);
    expect(res.statusCode).toBe(200);
    expect(res.headers.etag).toBe(`"${current.sha256.slice(0, 32)}"`);
  });

  it('applies a correction: same generated_at, new bytes, later commit', async () => {
    const current = (await fx.catalog.get(OTHER))!;
    const doc = Buffer.from(JSON.stringify({ ...oddsDocument('goldcrest', 'tennis', 3000, 9), corrected: true }));
    const entry = await fx.publish(OTHER, doc, { generatedAtMs: current.generatedAtMs });
    expect(entry.sha256).not.toBe(current.sha256);
    await within(PROMPTLY, async () => (await fetchFrom(a, `/v1/data/${OTHER}`)).rawPayload.equals(doc));
  });
});

describe('refresh, compression, store reads', () => {
  it('the periodic re-read picks up what no announcement told about', async () => {
    const name = 'site_pregame_hillview_soccer.json';
    const bytes = Buffer.from(JSON.stringify(oddsDocument('hillview', 'soccer', 1000, 4)));
    const { createHash } = await import('node:crypto');
    const sha = createHash('sha256').update(bytes).digest('hex');
    await fx.store.put(objectKey(name, sha), bytes);
    const entry: CatalogEntry = {
      filename: name,
      bookmaker: 'hillview',
      kind: 'pregame',
      sport: 'soccer',
      object: objectKey(name, sha),
      sha256: sha,
      size: bytes.length,
      generatedAt: new Date().toISOString(),
      generatedAtMs: Date.now(),
      publishedAt: new Date().toISOString(),
    };
    // Written behind the catalog's back: no announcement.
    await fx.redis.hset(fx.keys.catalog, name, JSON.stringify(entry));
    await within(10_000, async () => (await fetchFrom(a, `/v1/data/${name}`)).statusCode === 200, 50);
  });

  it('compresses a version only when asked, once per coding, however many ask at once', async () => {
    const doc = Buffer.from(JSON.stringify(oddsDocument('redstone', 'basketball', 50_000, 5)));
    const entry = await fx.publish(FILE, doc);
    await within(PROMPTLY, async () => (await fetchFrom(a, `/v1/data/${FILE}`)).headers.etag === `"${entry.sha256.slice(0, 32)}"`);
    await a.state.published.idle();
    const version = a.state.published.get(FILE)!;
    // Held, served, and never compressed: nobody asked for a coding yet.
    expect(version.gzip).toBeUndefined();
    expect(version.br).toBeUndefined();
    expect(version.making).toEqual({});

    const gz = await Promise.all(Array.from({ length: 8 }, () => fetchFrom(a, `/v1/data/${FILE}`, proKey, { 'accept-encoding': 'gzip' })));
    for (const r of gz) {
      expect(r.statusCode).toBe(200);
      expect(r.headers['content-encoding']).toBe('gzip');
      expect(r.headers.etag).toBe(`"${entry.sha256.slice(0, 32)}-gz"`);
      // One compression for all eight: the very same bytes, not eight equal ones.
      expect(r.rawPayload.equals(version.gzip!.body)).toBe(true);
    }
    expect(gunzipSync(gz[0]!.rawPayload).equals(doc)).toBe(true);
    const made = version.gzip;
    expect(version.br).toBeUndefined();
    await fetchFrom(a, `/v1/data/${FILE}`, proKey, { 'accept-encoding': 'gzip' });
    expect(version.gzip).toBe(made);
    expect(a.state.published.get(FILE)).toBe(version);

    const br = await fetchFrom(a, `/v1/data/${FILE}`, proKey, { 'accept-encoding': 'br, gzip' });
    expect(br.headers['content-encoding']).toBe('br');
    expect(brotliDecompressSync(br.rawPayload).equals(doc)).toBe(true);
    expect(version.making).toEqual({ gzip: 'settled', br: 'settled' });
  });

  it('serves identity when compressing does not make the body smaller, and does not try again', async () => {
    // A tiny document: gzip's header alone is bigger than what it could save.
    const tiny = Buffer.from('{"x":1}');
    const entry = await fx.publish(OTHER, tiny);
    await within(PROMPTLY, async () => (await fetchFrom(a, `/v1/data/${OTHER}`)).headers.etag === `"${entry.sha256.slice(0, 32)}"`);
    for (let i = 0; i < 3; i++) {
      const r = await fetchFrom(a, `/v1/data/${OTHER}`, proKey, { 'accept-encoding': 'gzip' });
      expect(r.statusCode).toBe(200);
      expect(r.headers['content-encoding']).toBeUndefined();
      expect(r.rawPayload.equals(tiny)).toBe(true);
    }
    const version = a.state.published.get(OTHER)!;
    expect(version.gzip).toBeUndefined();
    expect(version.making.gzip).toBe('settled');
  });

  it('holds a version offered by the publish step of its own process without reading the store', async () => {
    let gets = 0;
    const counting: Store = { ...fx.store, get: (key) => (gets++, fx.store.get(key)) };
    const r = await fx.start({ store: counting });
    await r.state.ready;
    const doc = Buffer.from(JSON.stringify(oddsDocument('redstone', 'basketball', 7000, 6)));
    const { createHash } = await import('node:crypto');
    const sha = createHash('sha256').update(doc).digest('hex');
    const now = Date.now() + 60_000;
    const entry: CatalogEntry = {
      filename: FILE,
      bookmaker: 'redstone',
      kind: 'live',
      sport: 'basketball',
      object: objectKey(FILE, sha),
      sha256: sha,
      size: doc.length,
      generatedAt: new Date(now).toISOString(),
      generatedAtMs: now,
      publishedAt: new Date().toISOString(),
    };
    await fx.store.put(entry.object, doc);
    const before = gets;
    // As the publish step does: offered with the bytes it wrote; then the commit announces it.
    r.state.published.offer(entry, Number(await fx.redis.get(fx.keys.catalogSeq)) + 1, doc);
    const res = await fetchFrom(r, `/v1/data/${FILE}`);
    expect(res.headers.etag).toBe(`"${sha.slice(0, 32)}"`);
    expect(res.rawPayload.equals(doc)).toBe(true);
    expect((await fx.catalog.commit(entry, 10)).outcome).toBe('published');
    // The announcement finds it held: no store read for it.
    await new Promise((res2) => setTimeout(res2, 200));
    await r.state.published.idle();
    expect(gets).toBe(before);
    // An older version offered late is not taken.
    const older = { ...entry, sha256: 'f'.repeat(64), generatedAtMs: entry.generatedAtMs - 60_000 };
    r.state.published.offer(older, 0, Buffer.from('{}'));
    expect(r.state.published.get(FILE)!.entry.sha256).toBe(entry.sha256);
    await r.close();
  });

  it('reads each version from the store once, never per request', async () => {
    let gets = 0;
    const counting: Store = { ...fx.store, get: (key) => (gets++, fx.store.get(key)) };
    const r = await fx.start({ store: counting });
    await r.state.ready;
    const afterLoad = gets;
    expect(afterLoad).toBeGreaterThan(0);
    for (let i = 0; i < 50; i++) {
      expect((await fetchFrom(r, `/v1/data/${OTHER}`, proKey, { 'accept-encoding': i % 2 ? 'gzip' : 'br' })).statusCode).toBe(200);
      expect((await fetchFrom(r, '/v1/files')).statusCode).toBe(200);
    }
    expect(gets).toBe(afterLoad);
    await r.close();
  });
});

describe('Redis away', () => {
  it('at start: the published set comes from the store manifest', async () => {
    await fx.syncManifest();
    const r = await fx.start({ redisUrl: 'redis://127.0.0.1:1' });
    expect(r.state.published.loaded).toBe(true);
    expect(r.state.published.filenames()).toContain(OTHER);
    const held = r.state.published.get(OTHER)!;
    expect(held.entry.sha256).toBe((await fx.catalog.get(OTHER))!.sha256);
    // Keys live in Redis only: /v1 says 503 (retry) rather than 401 until they can be read.
    expect((await fetchFrom(r, '/v1/files')).statusCode).toBe(503);
    await r.close();
  });

  it('after start: keeps serving and authenticating from memory; readyz says 503', async () => {
    const { key: revoked } = await fx.keyStore.create({ name: 'revoked-before-outage', plan: 'pro' });
    await fx.keyStore.revoke('revoked-before-outage');
    const r = await fx.start();
    await r.state.ready;
    r.redis.disconnect();
    r.subscriber.disconnect();
    await new Promise((res) => setTimeout(res, 50));
    expect((await fetchFrom(r, `/v1/data/${OTHER}`)).statusCode).toBe(200);
    expect((await fetchFrom(r, '/v1/files')).statusCode).toBe(200);
    expect((await fetchFrom(r, '/v1/files', revoked)).statusCode).toBe(401);
    const ready = await r.app.inject({ url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    // A re-read that fails keeps what is held.
    await r.state.refresh();
    expect((await fetchFrom(r, `/v1/data/${OTHER}`)).statusCode).toBe(200);
    expect((await fetchFrom(r, '/v1/files')).statusCode).toBe(200);
    await r.close();
  });
});

describe('startReader', () => {
  it('listens on the configured host and port (0: any), logs its URL, serves over real HTTP, closes', async () => {
    const { startReader } = await import('../../src/reader/index.js');
    const { createRedis } = await import('../../src/redis/connect.js');
    const redis = createRedis('redis://127.0.0.1:6379', 'client', 'start-test');
    const subscriber = createRedis('redis://127.0.0.1:6379', 'subscriber', 'start-test-sub');
    redis.on('error', () => undefined);
    subscriber.on('error', () => undefined);
    try {
      const reader = await startReader({
        config: fx.config,
        redis,
        subscriber,
        store: fx.store,
        catalog: fx.catalog,
        log: fx.log,
        registry: fx.registry,
        pressure: IN_TEST_PRESSURE,
      });
      try {
        expect(reader.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
        expect(fx.logLines.some((l) => l.includes('"msg":"reader listening"') && l.includes(reader.url))).toBe(true);
        await reader.ready;
        const health = await fetch(`${reader.url}/healthz`);
        expect(health.status).toBe(200);
        const res = await fetch(`${reader.url}/v1/data/${OTHER}`, { headers: { 'x-api-key': proKey, 'accept-encoding': 'gzip' } });
        expect(res.status).toBe(200);
        const body = Buffer.from(await res.arrayBuffer()); // fetch decodes gzip
        const entry = (await fx.catalog.get(OTHER))!;
        const { createHash } = await import('node:crypto');
        expect(createHash('sha256').update(body).digest('hex')).toBe(entry.sha256);
        const denied = await fetch(`${reader.url}/v1/files`);
        expect(denied.status).toBe(401);
        expect(denied.headers.get('content-type')).toBe('application/problem+json');
      } finally {
        await reader.close();
      }
      await expect(fetch(`${reader.url}/healthz`)).rejects.toThrow();
    } finally {
      redis.disconnect();
      subscriber.disconnect();
    }
  });
});
