/**
 * Drops written in place under their final name (no rename), with the default settings: picked up
 * at once, mid-write, yet published whole, however the writer paces its writes (pauses up to a
 * second); rejected only once they stop changing for `ingest.settle` (2 s), and a rejection whose
 * writer went on writing is withdrawn and the file goes through again. Renamed drops pay no
 * settle delay.
 */
import { open, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLE_FEEDS, generateDocument } from '../../fixtures/corpus.js';
import { drop, pendingDrops, rejectionRecords } from '../../helpers/drops.js';
import { readCatalog, sha256 } from '../../helpers/published.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('drops written in place', () => {
  const prefix = uniquePrefix('e2e-inplace');
  let svc: RunningOddsfiles;
  let dataDir: string;
  let inbox: string;

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-inplace');
    inbox = join(dataDir, 'inbox');
    svc = await startOddsfiles(baseEnv(dataDir, prefix));
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  const rejectedIds = async () => (await readdir(join(dataDir, 'rejected')).catch(() => [] as string[])).filter((i) => !i.startsWith('.'));

  it('publishes a 200 KB upload written in chunks over about 4 s, with pauses of up to 1 s, whole', async () => {
    const feed = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_redstone_basketball.json')!;
    const bytes = generateDocument(feed, { generatedAt: '2026-11-21T18:00:00Z', targetBytes: 200_000 });
    const pauses = [400, 1000, 250, 700, 1000, 150, 600];
    const fh = await open(join(inbox, feed.filename), 'w');
    const t0 = Date.now();
    for (let i = 0; i <= pauses.length; i++) {
      const n = pauses.length + 1;
      await fh.write(bytes.subarray(Math.floor((i * bytes.length) / n), Math.floor(((i + 1) * bytes.length) / n)));
      if (i < pauses.length) await sleep(pauses[i]!);
    }
    await fh.close();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(3000);
    const entry = await waitFor(async () => (await readCatalog(prefix)).get(feed.filename), 20_000, 'the upload published');
    expect(entry.sha256).toBe(sha256(bytes));
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 20_000, 'an empty inbox');
    expect(await rejectedIds()).toEqual([]);
    expect(svc.logs.filter((l) => l.filename === feed.filename && l.outcome === 'rejected')).toEqual([]);
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

  it('publishes the newest complete content of a file rewritten through its open descriptor while it is processed', async () => {
    // Several trials, each on a feed of its own: the rewrites land before, during and after the
    // worker's read and validation of the earlier versions, as the scheduler has it.
    const names = ['bluewater_soccer', 'bluewater_basketball', 'goldcrest_soccer', 'goldcrest_basketball', 'hillview_soccer', 'hillview_basketball'];
    const feeds = names.map((n) => EXAMPLE_FEEDS.find((f) => f.filename === `site_live_${n}.json`)!);
    // Every version made first (about 200 KB each: long enough to validate), newer each time (newest wins).
    const versions = feeds.map((feed, trial) =>
      [0, 1, 2, 3, 4].map((v) => generateDocument(feed, { generatedAt: new Date(Date.UTC(2026, 10, 22, 10, trial, v)).toISOString(), targetBytes: 200_000 })),
    );
    const finals = await Promise.all(
      feeds.map(async (feed, trial) => {
        const fh = await open(join(inbox, feed.filename), 'w');
        for (const bytes of versions[trial]!) {
          await fh.truncate(0);
          await fh.write(bytes, 0, bytes.length, 0);
          await sleep(20);
        }
        // Still linked after the last write: that write is in the claim, and must be published. On
        // a loaded machine a pause of the writer can outlast the whole settling of an earlier
        // version, whose claim is then removed: what is written after that is lost, as the
        // publishers' page says (close the file when it is complete).
        const linked = (await fh.stat()).nlink > 0;
        await fh.close();
        return { feed, last: versions[trial]!.at(-1)!, linked, all: versions[trial]!.map((b) => sha256(b)) };
      }),
    );
    expect(finals.filter((f) => f.linked).length, 'trials whose last write landed before the claim went').toBeGreaterThan(0);
    for (const { feed, last, linked, all } of finals) {
      if (!linked) {
        await waitFor(
          async () => all.includes((await readCatalog(prefix)).get(feed.filename)?.sha256 ?? ''),
          60_000,
          `a version of ${feed.filename} published`,
        );
        continue;
      }
      const entry = await waitFor(
        async () => {
          const e = (await readCatalog(prefix)).get(feed.filename);
          return e?.sha256 === sha256(last) ? e : undefined;
        },
        60_000,
        `the final version of ${feed.filename} published`,
      );
      expect(entry.generatedAt).toBe(JSON.parse(last.toString()).generated_at);
    }
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 30_000, 'an empty inbox');
  }, 120_000);

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
        const ids = await rejectedIds();
        return ids.length > 0 ? ids : undefined;
      },
      20_000,
      'the rejection',
    );
    expect(rejected).toHaveLength(1);
    // Not before the last write plus the settle time (2 s by default).
    expect(Date.now() - started).toBeGreaterThanOrEqual(150 + 2000);
    // The rejection is on disk before its log line has come through the service's stdout.
    const log = await svc.waitForLog((l) => l.filename === name && l.outcome === 'rejected');
    expect(log.reason).toBe('invalid_json');
    // What is kept is what was judged.
    expect(await readFile(join(dataDir, 'rejected', rejected[0]!, name), 'utf8')).toBe('{"bookmaker":"redstone","events":[{"event_id":"x"}');
  });

  it('publishes a renamed drop without waiting for settle', async () => {
    const feed = EXAMPLE_FEEDS.find((f) => f.filename === 'site_pregame_redstone_tennis.json')!;
    const bytes = generateDocument(feed, { generatedAt: '2026-11-21T19:00:00Z', targetBytes: 20_000 });
    const t0 = Date.now();
    await drop(inbox, feed.filename, bytes);
    await waitFor(async () => (await readCatalog(prefix)).get(feed.filename)?.sha256 === sha256(bytes), 10_000, 'published', 5);
    // Within the 2 s settle time (however loaded the machine): renamed drops are not held back.
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  it('catches a re-drop of the same name right after the previous one was claimed (no wait for the rescan)', async () => {
    const feed = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_northwind_tennis.json')!;
    for (let i = 0; i < 6; i++) {
      const bytes = generateDocument(feed, { generatedAt: new Date(Date.parse('2026-11-21T20:00:00Z') + i * 1000).toISOString(), targetBytes: 5_000 });
      const t0 = Date.now();
      await drop(inbox, feed.filename, bytes);
      await waitFor(async () => (await readCatalog(prefix)).get(feed.filename)?.sha256 === sha256(bytes), 10_000, `version ${i} published`, 5);
      // The rescan takes only drops 2 × settle (4 s) old: a missed event would show as a wait of 4 s or more.
      expect(Date.now() - t0, `version ${i}`).toBeLessThan(4000);
    }
  });

  it('withdraws a rejection whose writer went on writing after a pause longer than settle, and publishes the file', async () => {
    const feed = EXAMPLE_FEEDS.find((f) => f.filename === 'site_pregame_northwind_basketball.json')!;
    const bytes = generateDocument(feed, { generatedAt: '2026-11-21T18:10:00Z', targetBytes: 30_000 });
    const before = await rejectedIds();
    const fh = await open(join(inbox, feed.filename), 'w');
    await fh.write(bytes.subarray(0, 10_000));
    // Quiet for longer than settle: rejected as it stands.
    const rejected = await waitFor(async () => (await rejectedIds()).find((id) => !before.includes(id)), 10_000, 'the half-written file rejected');
    expect((await rejectionRecords(join(dataDir, 'rejected'))).find((r) => r.id === rejected)!.reason).toBe('invalid_json');
    // The writer goes on: the rejected copy stays the bytes judged...
    await fh.write(bytes.subarray(10_000));
    await fh.close();
    // (unless a rescan has already seen the write and withdrawn it: then the folder is gone).
    const kept = await readFile(join(dataDir, 'rejected', rejected, feed.filename)).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw err;
    });
    if (kept) expect(kept.length).toBe(10_000);
    // ...then the rejection is withdrawn and the whole file published.
    const entry = await waitFor(async () => (await readCatalog(prefix)).get(feed.filename), 20_000, 'the whole file published');
    expect(entry.sha256).toBe(sha256(bytes));
    expect(await rejectedIds()).not.toContain(rejected);
    await svc.waitForLog((l) => l.rejectionId === rejected && /withdrawn/.test(String(l.msg)));
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 20_000, 'an empty inbox');
  });
});
