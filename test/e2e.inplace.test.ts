/**
 * Drops written in place under their final name (no rename): picked up at once, mid-write, yet
 * published whole, and rejected only once they stop changing. Renamed drops pay no settle delay.
 */
import { open, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLE_FEEDS, generateDocument } from './fixtures/corpus.js';
import { drop, pendingDrops } from './helpers/drops.js';
import { readCatalog, sha256 } from './helpers/published.js';
import { dropPrefix, uniquePrefix } from './helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type RunningOddsfiles } from './helpers/service.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('drops written in place', () => {
  const prefix = uniquePrefix('e2e-inplace');
  let svc: RunningOddsfiles;
  let dataDir: string;
  let inbox: string;

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-inplace');
    inbox = join(dataDir, 'inbox');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), 'ingest:\n  settle: 1s\n');
    svc = await startOddsfiles(baseEnv(dataDir, prefix, { ODDSFILES_CONFIG: join(dataDir, 'oddsfiles.yaml') }));
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it('publishes a document written in chunks with pauses shorter than settle, whole', async () => {
    const feed = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_redstone_tennis.json')!;
    const bytes = generateDocument(feed, { generatedAt: '2026-11-21T19:00:00Z', targetBytes: 60_000 });
    const fh = await open(join(inbox, feed.filename), 'w');
    for (let i = 0; i < 6; i++) {
      await fh.write(bytes.subarray((i * bytes.length) / 6, ((i + 1) * bytes.length) / 6));
      await sleep(120);
    }
    await fh.close();
    const entry = await waitFor(async () => (await readCatalog(prefix)).get(feed.filename), 20_000, 'the document published');
    expect(entry.sha256).toBe(sha256(bytes));
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 20_000, 'an empty inbox');
    expect(await readdir(join(dataDir, 'rejected')).catch(() => [])).toEqual([]);
  });

  it('rejects an invalid document written in place only after it stops changing', async () => {
    const name = 'site_live_redstone_soccer.json';
    const fh = await open(join(inbox, name), 'w');
    const started = Date.now();
    await fh.write('{"bookmaker":"redstone","events":[');
    await sleep(150);
    await fh.write('{"event_id":"x"}');
    await fh.close();
    const rejected = await waitFor(
      async () => {
        const ids = (await readdir(join(dataDir, 'rejected')).catch(() => [] as string[])).filter((i) => !i.startsWith('.'));
        return ids.length > 0 ? ids : undefined;
      },
      20_000,
      'the rejection',
    );
    expect(rejected).toHaveLength(1);
    // Not before the last write plus the settle time.
    expect(Date.now() - started).toBeGreaterThanOrEqual(150 + 1000);
    const log = svc.logs.find((l) => l.filename === name && l.outcome === 'rejected')!;
    expect(log.reason).toBe('invalid_json');
  });

  it('publishes a renamed drop without waiting for settle', async () => {
    const feed = EXAMPLE_FEEDS.find((f) => f.filename === 'site_pregame_redstone_tennis.json')!;
    const bytes = generateDocument(feed, { generatedAt: '2026-11-21T19:00:00Z', targetBytes: 20_000 });
    const t0 = Date.now();
    await drop(inbox, feed.filename, bytes);
    await waitFor(async () => (await readCatalog(prefix)).get(feed.filename)?.sha256 === sha256(bytes), 10_000, 'published', 5);
    // Below the 1 s settle time: renamed drops are not held back.
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it('catches a re-drop of the same name right after the previous one was claimed (no wait for the rescan)', async () => {
    const feed = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_northwind_tennis.json')!;
    for (let i = 0; i < 6; i++) {
      const bytes = generateDocument(feed, { generatedAt: new Date(Date.parse('2026-11-21T20:00:00Z') + i * 1000).toISOString(), targetBytes: 5_000 });
      const t0 = Date.now();
      await drop(inbox, feed.filename, bytes);
      await waitFor(async () => (await readCatalog(prefix)).get(feed.filename)?.sha256 === sha256(bytes), 10_000, `version ${i} published`, 5);
      // The rescan runs every 5 s: a missed event would show as a multi-second wait.
      expect(Date.now() - t0, `version ${i}`).toBeLessThan(1500);
    }
  });
});
