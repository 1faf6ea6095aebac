/**
 * A version named in the change log is loaded as soon as the log is read, before (or without) its
 * announcement on the catalog channel: the reader completes the log's entry (the filename's feed,
 * the object's key) as the publish step made it. A filename this reader does not serve is ignored.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changeEntryOf } from '../../src/catalog/change-log.js';
import type { CatalogEntry } from '../../src/catalog/types.js';
import { objectKey } from '../../src/store/store.js';
import { createReaderFixture, oddsDocument, within, type ReaderFixture, type ReaderInstance } from '../helpers/reader-fixture.js';

const FILE = 'site_live_redstone_basketball.json';

let fx: ReaderFixture;
let reader: ReaderInstance;

beforeAll(async () => {
  // No periodic re-read of the catalog within the test: only what the test hands the reader.
  fx = await createReaderFixture('reader-heard', { refreshMs: 600_000 });
  reader = await fx.start();
  await reader.state.ready;
});

afterAll(async () => {
  await reader?.close();
  await fx?.cleanup();
});

describe('a version heard of in the change log', () => {
  it('is loaded from the store with the entry the publish step made', async () => {
    const bytes = Buffer.from(JSON.stringify(oddsDocument('redstone', 'basketball', 3000, 7)));
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const now = new Date();
    const entry: CatalogEntry = {
      filename: FILE,
      bookmaker: 'redstone',
      kind: 'live',
      sport: 'basketball',
      object: objectKey(FILE, sha256),
      sha256,
      size: bytes.length,
      generatedAt: now.toISOString(),
      generatedAtMs: now.getTime(),
      publishedAt: now.toISOString(),
    };
    await fx.store.put(entry.object, bytes, 'application/json');
    const published = reader.state.published;
    expect(published.get(FILE)).toBeUndefined();

    published.heard(changeEntryOf(entry), 1_000_000);
    await within(5000, () => published.get(FILE)?.entry.sha256 === sha256);
    expect(published.get(FILE)!.entry).toEqual(entry);
    expect(published.get(FILE)!.identity.body.equals(bytes)).toBe(true);

    // The same version announced afterwards: still the one held, loaded once.
    const held = published.get(FILE);
    published.heard(entry, 1_000_000);
    expect(published.get(FILE)).toBe(held);
  });

  it('ignores a filename this reader does not serve', () => {
    const published = reader.state.published;
    published.heard({ filename: 'not_a_feed.json', sha256: 'a'.repeat(64), size: 1, generatedAt: '', generatedAtMs: 0, publishedAt: '' }, 1_000_001);
    expect(published.get('not_a_feed.json')).toBeUndefined();
    expect(published.filenames()).not.toContain('not_a_feed.json');
  });
});
