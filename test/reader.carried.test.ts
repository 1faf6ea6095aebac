/**
 * Versions carried with their commit (src/catalog/carried.ts, src/ingest/carry.ts): the commit
 * script publishes the bytes on the bytes channel just before the announcement; a reader of
 * another process holds them without reading the store, and reads the store as before for an
 * announcement that came without (or with bytes that are not its version's). Real Redis, real
 * filesystem store; the reader's store counts the reads it is asked for and passes them on.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeCarried } from '../src/catalog/carried.js';
import type { Store } from '../src/store/store.js';
import { TEST_REDIS_URL } from './helpers/redis.js';
import { createReaderFixture, oddsDocument, within, type ReaderFixture, type ReaderInstance } from './helpers/reader-fixture.js';

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
  it('are delivered on the bytes channel right before their announcement, on one connection, and counted', async () => {
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

      // The same bytes again: unchanged, nothing carried nor announced.
      const again = await fx.catalog.commit(result.current, 10, result.bytes);
      expect(again.outcome).toBe('unchanged');
      expect(again.carriedTo).toBeUndefined();
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

  it('reach no reader that does not take them (a reader in the worker process): the commit reports 0', () =>
    withReader({ carried: false }, async (reader) => {
      const result = await fx.publishCarried(FILE, oddsDocument('northwind', 'soccer', 2000, 7));
      expect(result.carriedTo).toBe(0);
      await within(2000, async () => (await served(reader, result.current.sha256)) !== undefined);
      expect(reads).toEqual([result.current.object]);
    }));
});
