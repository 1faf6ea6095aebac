/**
 * Versions carried ahead of their commit (src/catalog/carried.ts, src/ingest/publish/carry.ts): the
 * worker publishes the bytes on the bytes channel before its store write and commit, on the same
 * connection; a reader of another process holds them without reading the store, and reads the
 * store as before for an announcement that came without (or with bytes that are not its
 * version's). Real Redis, real filesystem store; the reader's store counts the reads it is asked
 * for and passes them on. The bounds of what a reader keeps are tested on their own below.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCarriedBytes, encodeCarried } from '../../src/catalog/carried.js';
import type { CatalogEntry } from '../../src/catalog/types.js';
import type { Store } from '../../src/store/store.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';
import { createReaderFixture, oddsDocument, within, type ReaderFixture, type ReaderInstance } from '../helpers/reader-fixture.js';

const FILE = 'site_live_northwind_soccer.json';

let fx: ReaderFixture;
let proKey: string;
const reads: string[] = [];
/** The fixture's fs store, recording every object the reader reads. */
let countingStore: Store;

beforeAll(async () => {
  fx = await createReaderFixture('reader-carried');
  proKey = (await fx.keyStore.create({ name: 'pro', plan: 'pro' })).key;
  countingStore = {
    ...fx.store,
    get: async (key: string) => {
      reads.push(key);
      return fx.store.get(key);
    },
  };
});

afterAll(async () => {
  await fx?.cleanup();
});

/** A reader on the counting store, closed whatever happens. */
const withReader = async (options: { carried?: boolean }, fn: (r: ReaderInstance) => Promise<void>) => {
  const reader = await fx.start({ store: countingStore, ...options });
  try {
    await reader.state.ready;
    reads.length = 0;
    await fn(reader);
  } finally {
    await reader.close();
  }
};

const served = async (r: ReaderInstance, sha256: string) => {
  const res = await r.app.inject({ url: `/v1/data/${FILE}`, headers: { 'x-api-key': proKey } });
  return res.statusCode === 200 && res.headers.etag === `"${sha256.slice(0, 32)}"` ? res.rawPayload : undefined;
};

describe('versions carried with their commit', () => {
  it('are delivered on the bytes channel before their announcement, on one connection, and counted', async () => {
    const sub = new Redis(TEST_REDIS_URL);
    try {
      const got: [string, Buffer][] = [];
      sub.on('messageBuffer', (ch: Buffer, msg: Buffer) => got.push([ch.toString(), msg]));
      await sub.subscribe(fx.keys.catalogBytesChannel, fx.keys.catalogChannel);
      const result = await fx.publishCarried(FILE, oddsDocument('northwind', 'soccer', 3000, 1));
      expect(result.outcome).toBe('published');
      expect(result.carriedTo).toBe(1);
      await within(2000, () => got.length >= 2);
      expect(got.map(([ch]) => ch)).toEqual([fx.keys.catalogBytesChannel, fx.keys.catalogChannel]);
      expect(got[0]![1].equals(encodeCarried(result.current.sha256, result.bytes))).toBe(true);
      expect(JSON.parse(got[1]![1].toString()).entry).toEqual(result.current);

      // Without bytes to carry, only the announcement.
      await fx.publish(FILE, oddsDocument('northwind', 'soccer', 3000, 2));
      await within(2000, () => got.length >= 3);
      await new Promise((r) => setTimeout(r, 50));
      expect(got.map(([ch]) => ch)).toEqual([fx.keys.catalogBytesChannel, fx.keys.catalogChannel, fx.keys.catalogChannel]);
    } finally {
      sub.disconnect();
    }
  });

  it('are held by a reader of another process without reading the store', () =>
    withReader({}, async (reader) => {
      const result = await fx.publishCarried(FILE, oddsDocument('northwind', 'soccer', 20_000, 3));
      expect(result.carriedTo).toBe(1);
      await within(2000, async () => (await served(reader, result.current.sha256)) !== undefined);
      expect((await served(reader, result.current.sha256))!.equals(result.bytes)).toBe(true);
      expect(reads).toEqual([]);

      // Announced without its bytes: read from the store, as before.
      const plain = await fx.publish(FILE, oddsDocument('northwind', 'soccer', 20_000, 4));
      await within(2000, async () => (await served(reader, plain.sha256)) !== undefined);
      expect(reads).toEqual([plain.object]);
    }));

  it('are not used when they are not the announced version: the store is read', () =>
    withReader({}, async (reader) => {
      // Bytes of some other version published on the bytes channel, then an announcement without any.
      const stray = Buffer.from(JSON.stringify(oddsDocument('northwind', 'soccer', 2000, 5)));
      await fx.redis.publish(fx.keys.catalogBytesChannel, encodeCarried('0'.repeat(64), stray));
      const entry = await fx.publish(FILE, oddsDocument('northwind', 'soccer', 2000, 6));
      await within(2000, async () => (await served(reader, entry.sha256)) !== undefined);
      expect(reads).toEqual([entry.object]);
    }));

  it("in the worker's process, are handed to its reader before the commit: the announcement reads nothing", () =>
    withReader({ carried: false }, async (reader) => {
      const entry = await fx.publish(FILE, oddsDocument('northwind', 'soccer', 20_000, 8), {
        beforeCommit: (sha256, bytes) => reader.state.published.expect(sha256, bytes),
      });
      await within(2000, async () => (await served(reader, entry.sha256)) !== undefined);
      expect(reads).toEqual([]);
    }));

  it('reach no reader that does not take them (a reader in the worker process): the commit reports 0', () =>
    withReader({ carried: false }, async (reader) => {
      const result = await fx.publishCarried(FILE, oddsDocument('northwind', 'soccer', 2000, 7));
      expect(result.carriedTo).toBe(0);
      await within(2000, async () => (await served(reader, result.current.sha256)) !== undefined);
      expect(reads).toEqual([result.current.object]);
    }));
});

describe('what a reader keeps of carried bytes while it waits for their announcement', () => {
  const sha = (i: number) => i.toString(16).padStart(64, '0');
  const entryFor = (i: number, size: number) => ({ sha256: sha(i), size }) as CatalogEntry;
  const message = (i: number, size: number) => encodeCarried(sha(i), Buffer.alloc(size, i));

  it('gives the bytes to the announcement of the same sha256 and size, once, as a copy', () => {
    const c = createCarriedBytes();
    const m = message(1, 100);
    c.put(m);
    expect(c.take(entryFor(1, 99))).toBeUndefined(); // wrong size: taken out, not used
    c.put(m);
    const got = c.take(entryFor(1, 100))!;
    expect(got.equals(Buffer.alloc(100, 1))).toBe(true);
    m.fill(0);
    expect(got.equals(Buffer.alloc(100, 1))).toBe(true);
    expect(c.take(entryFor(1, 100))).toBeUndefined();
    expect(c.size).toBe(0);
  });

  it('ignores what is not a carried message', () => {
    const c = createCarriedBytes();
    c.put(Buffer.from('short'));
    c.put(Buffer.concat([Buffer.from('Z'.repeat(64)), Buffer.alloc(10)]));
    c.hold('not a sha256', Buffer.alloc(10));
    expect(c.size).toBe(0);
    c.hold(sha(9), Buffer.alloc(10, 9));
    expect(c.take(entryFor(9, 10))?.equals(Buffer.alloc(10, 9))).toBe(true);
  });

  it('keeps at most maxEntries and maxBytes, evicting the oldest, and nothing older than maxAgeMs', () => {
    let t = 0;
    const c = createCarriedBytes({ maxEntries: 3, maxBytes: 1000, maxAgeMs: 5000, now: () => t });
    for (let i = 1; i <= 4; i++) c.put(message(i, 100));
    expect(c.size).toBe(3);
    expect(c.take(entryFor(1, 100))).toBeUndefined();
    c.put(message(5, 850)); // 3 entries, then 200 + 850 > 1000 bytes: the two oldest go
    expect(c.take(entryFor(2, 100))).toBeUndefined();
    expect(c.take(entryFor(3, 100))).toBeUndefined();
    expect(c.take(entryFor(4, 100))).toBeDefined();
    c.put(message(6, 100));
    t += 5001;
    expect(c.take(entryFor(6, 100))).toBeUndefined(); // waited too long
    c.put(message(7, 100)); // evicts 5, now too old
    expect(c.size).toBe(1);
    c.put(message(8, 2000)); // larger than everything it may keep
    expect(c.size).toBe(1);
    // An announcement of something else sweeps out what waited too long (a version never committed).
    t += 5001;
    expect(c.take(entryFor(9, 100))).toBeUndefined();
    expect(c.size).toBe(0);
  });
});
