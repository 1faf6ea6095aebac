/**
 * Fault 1: SIGKILL of the whole service mid-stream, several times, at random moments. Drops
 * stream in at ~100/s over all 38 filenames while a poller downloads continuously over HTTP with
 * a real key. After the last restart: every filename serves its newest drop, the inbox and
 * .processing are empty, nothing valid was rejected, every object in the store is whole, the
 * manifest matches the catalog, and the poller saw no torn body, no generated_at going back and
 * no 404 for a name once served.
 *
 * The kill is not aimed here (see aimed.test.ts): the rounds record where it landed
 * (claims in flight, temp files in the store, the manifest behind the catalog).
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXAMPLE_FEEDS } from '../fixtures/corpus.js';
import {
  SLOW_FAULTS,
  VersionBook,
  catalogSeqAt,
  createApiKey,
  freePort,
  prng,
  readCatalogAt,
  rejectionsIn,
  sleep,
  startDropStream,
  startPoller,
  waitServesNewest,
  writeFaultConfig,
} from '../helpers/faults.js';
import { pendingDrops } from '../helpers/drops.js';
import { assertObjectsWhole } from '../helpers/published.js';
import { TEST_REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';

const ROUNDS = SLOW_FAULTS ? 6 : 2;

describe('fault: SIGKILL of the whole service while drops stream in and a poller downloads', () => {
  const prefix = uniquePrefix('faults-crash');
  const running: RunningOddsfiles[] = [];

  afterAll(async () => {
    for (const r of running) await r.kill();
    await dropPrefix(prefix);
  });

  it(`loses nothing, tears nothing, never goes back (${ROUNDS} kills at random moments)`, async () => {
    const dataDir = await makeDataDir('faults-crash');
    const inbox = join(dataDir, 'inbox');
    const storeDir = join(dataDir, 'store');
    const port = await freePort();
    const configFile = await writeFaultConfig(dataDir, 'ingest:\n  lock_duration: 3s\n  rescan: 1s\n');
    const env = baseEnv(dataDir, prefix, { ODDSFILES_CONFIG: configFile, PORT: String(port) });
    const url = `http://127.0.0.1:${port}`;
    const key = await createApiKey(env);

    let svc = await startOddsfiles(env);
    running.push(svc);
    const book = new VersionBook();
    const startMs = Math.floor(Date.now() / 1000) * 1000 - 30 * 86_400_000;
    const stream = startDropStream({ inbox, feeds: EXAMPLE_FEEDS, perSecond: 100, book, startMs });
    const poller = startPoller({ url: () => url, key, names: EXAMPLE_FEEDS.map((f) => f.filename), book, loops: 3, pauseMs: 2 });

    const random = prng(0xc0ffee);
    const landed: Record<string, number>[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      await sleep(300 + random() * 2200);
      await svc.kill();
      expect(svc.proc.signalCode).toBe('SIGKILL');
      // Where did it land? Claims in flight, half-written store temp files, manifest behind.
      const claims = await readdir(join(inbox, '.processing')).catch(() => []);
      const tmp = await readdir(join(storeDir, '.tmp')).catch(() => []);
      const manifestSeq = await readFile(join(storeDir, 'manifest.json'), 'utf8').then(
        (t) => (JSON.parse(t) as { seq: number }).seq,
        () => 0,
      );
      landed.push({ claims: claims.length, storeTemp: tmp.length, manifestBehind: (await catalogSeqAt(TEST_REDIS_URL, prefix)) - manifestSeq });
      await sleep(random() * 800);
      svc = await startOddsfiles(env);
      running.push(svc);
    }
    await sleep(1500);
    const dropped = await stream.stop();
    const recoverMs = await waitServesNewest(url, key, book, 90_000);
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 60_000, 'an empty inbox and .processing');
    const report = await poller.stop();
    console.info(
      JSON.stringify({
        test: 'faults.crash',
        dropped,
        rounds: landed,
        recoverMs,
        poller: { ...report, violations: report.violations.slice(0, 10), served: report.served.size },
      }),
    );

    expect(report.violations).toEqual([]);
    expect(report.ok).toBeGreaterThan(100);
    expect(report.served.size).toBe(38);
    expect(await rejectionsIn(join(dataDir, 'rejected'))).toEqual([]);
    // Redis holds the newest of each, the store holds whole objects only, the manifest follows.
    const catalog = await readCatalogAt(TEST_REDIS_URL, prefix);
    for (const [name, v] of book.newest) expect(catalog.get(name)?.sha256, name).toBe(v.sha256);
    expect(await assertObjectsWhole(storeDir)).toBeGreaterThanOrEqual(38);
    await waitFor(
      async () => {
        const manifest = JSON.parse(await readFile(join(storeDir, 'manifest.json'), 'utf8')) as { seq: number; files: Record<string, { sha256: string }> };
        return manifest.seq === (await catalogSeqAt(TEST_REDIS_URL, prefix)) && [...book.newest].every(([n, v]) => manifest.files[n]?.sha256 === v.sha256);
      },
      10_000,
      'the manifest to match the catalog',
    );
    expect(await svc.stop()).toBe(0);
  }, 300_000);

  it('SIGTERM mid-stream: exits 0 with .processing empty and the manifest current; the rest waits in the inbox', async () => {
    const prefix2 = uniquePrefix('faults-term');
    const dataDir = await makeDataDir('faults-term');
    const inbox = join(dataDir, 'inbox');
    const storeDir = join(dataDir, 'store');
    const port = await freePort();
    const env = baseEnv(dataDir, prefix2, { ODDSFILES_CONFIG: await writeFaultConfig(dataDir), PORT: String(port) });
    const key = await createApiKey(env);
    try {
      const book = new VersionBook();
      const startMs = Math.floor(Date.now() / 1000) * 1000 - 30 * 86_400_000;
      for (let round = 0; round < 3; round++) {
        const svc = await startOddsfiles(env);
        running.push(svc);
        const stream = startDropStream({ inbox, feeds: EXAMPLE_FEEDS, perSecond: 150, book, startMs: startMs + round * 86_400_000 });
        await sleep(700 + round * 400);
        expect(await svc.stop()).toBe(0);
        await stream.stop();
        expect(await readdir(join(inbox, '.processing')), 'nothing left claimed after a clean stop').toEqual([]);
        const manifest = JSON.parse(await readFile(join(storeDir, 'manifest.json'), 'utf8')) as { seq: number };
        expect(manifest.seq, 'the manifest written before exit').toBe(await catalogSeqAt(TEST_REDIS_URL, prefix2));
      }
      const svc = await startOddsfiles(env);
      running.push(svc);
      await waitServesNewest(`http://127.0.0.1:${port}`, key, book, 60_000);
      await waitFor(async () => (await pendingDrops(inbox)).length === 0, 30_000, 'an empty inbox');
      expect(await rejectionsIn(join(dataDir, 'rejected'))).toEqual([]);
      expect(await svc.stop()).toBe(0);
    } finally {
      await dropPrefix(prefix2);
    }
  }, 120_000);
});
