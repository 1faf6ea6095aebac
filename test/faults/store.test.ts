/**
 * Fault 4: the store refuses writes. Tests run as root, so chmod proves nothing; instead a folder
 * on the path of the filesystem store's root is replaced by a regular file (every write then fails
 * with ENOTDIR), and later put back. Meanwhile drops keep arriving and a poller keeps downloading:
 * drops stay in the inbox or .processing, are retried with backoff, nothing is rejected, the
 * reader keeps serving (and /readyz says 503), and once the store is back everything is published
 * without a restart. Also: an S3 store answering 503 SlowDown to every write, through a proxy.
 */
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { EXAMPLE_FEEDS } from '../fixtures/corpus.js';
import {
  VersionBook,
  createApiKey,
  docFor,
  dropFile,
  freePort,
  httpGet,
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
import { startS3rver, type RunningS3rver } from '../helpers/s3/s3rver.js';
import { startTrapProxy, type TrapProxy } from '../helpers/s3/trap-proxy.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';

const OUTAGE_MS = 8000;

describe('fault: the store refuses writes', () => {
  const prefixes: string[] = [];
  const running: RunningOddsfiles[] = [];
  let s3: RunningS3rver | undefined;
  let proxy: TrapProxy | undefined;

  afterAll(async () => {
    for (const r of running) await r.kill();
    await proxy?.close();
    await s3?.stop();
    for (const p of prefixes) await dropPrefix(p);
  });

  /** Stream drops and poll through one outage; `down`/`up` break and repair the store. */
  const throughOutage = async (label: string, extraEnv: Record<string, string>, down: () => Promise<void>, up: () => Promise<void>, storeDir?: string) => {
    const prefix = uniquePrefix(`faults-store-${label}`);
    prefixes.push(prefix);
    const dataDir = await makeDataDir(`faults-store-${label}`);
    const inbox = join(dataDir, 'inbox');
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const configFile = await writeFaultConfig(dataDir, 'ingest:\n  rescan: 1s\n');
    const env = baseEnv(dataDir, prefix, { ODDSFILES_CONFIG: configFile, PORT: String(port), ...extraEnv });
    const key = await createApiKey(env);
    const svc = await startOddsfiles(env);
    running.push(svc);
    const book = new VersionBook();
    const seq = { n: 0 };
    const startMs = Math.floor(Date.now() / 1000) * 1000 - 86_400_000;
    const names = EXAMPLE_FEEDS.map((f) => f.filename);
    const poller = startPoller({ url: () => url, key, names, book, loops: 2, pauseMs: 5 });
    let stream = startDropStream({ inbox, feeds: EXAMPLE_FEEDS, perSecond: 40, book, startMs, seq });
    await sleep(1500);
    await stream.stop();
    await waitServesNewest(url, key, book, 30_000);

    stream = startDropStream({ inbox, feeds: EXAMPLE_FEEDS, perSecond: 40, book, startMs, seq });
    await down();
    const okBefore = poller.report.ok;
    const catalogBefore = await readCatalogAt(TEST_REDIS_URL, prefix);
    const t0 = Date.now();
    let notReady = 0;
    let maxPending = 0;
    while (Date.now() - t0 < OUTAGE_MS) {
      if ((await httpGet(`${url}/readyz`).catch(() => undefined))?.status === 503) notReady++;
      maxPending = Math.max(maxPending, (await pendingDrops(inbox)).length);
      await sleep(500);
    }
    await stream.stop();
    const servedDuring = poller.report.ok - okBefore;
    // Nothing could be published while the store refused writes.
    const catalogDuring = await readCatalogAt(TEST_REDIS_URL, prefix);
    const publishedDuring = [...catalogDuring].filter(([n, e]) => catalogBefore.get(n)?.sha256 !== e.sha256).length;
    expect(await rejectionsIn(join(dataDir, 'rejected'))).toEqual([]);
    await up();
    const recoverMs = await waitServesNewest(url, key, book, 60_000);
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 30_000, 'an empty inbox and .processing');
    const retries = svc.logs.filter((l) => l.msg === 'drop will be retried').length;
    const report = await poller.stop();
    const result = {
      test: 'faults.store',
      label,
      outageMs: OUTAGE_MS,
      dropped: seq.n,
      maxPending,
      publishedDuring,
      retries,
      servedDuring,
      notReady,
      recoverMs,
      poller: { ...report, violations: report.violations.slice(0, 10), served: report.served.size },
    };
    console.info(JSON.stringify(result));
    expect(report.violations).toEqual([]);
    expect(servedDuring).toBeGreaterThan(10);
    expect(maxPending).toBeGreaterThan(0);
    expect(publishedDuring).toBe(0);
    expect(retries).toBeGreaterThan(0);
    expect(await rejectionsIn(join(dataDir, 'rejected'))).toEqual([]);
    if (storeDir) expect(await assertObjectsWhole(storeDir)).toBeGreaterThanOrEqual(38);
    expect(await svc.stop()).toBe(0);
    return { ...result, notReady };
  };

  it('filesystem store: a folder on its path replaced by a file, then put back', async () => {
    const root = await makeDataDir('faults-store-root');
    const parent = join(root, 'mnt');
    const storeDir = join(parent, 'store');
    await mkdir(storeDir, { recursive: true });
    const r = await throughOutage(
      'fs',
      { STORE_URL: pathToFileURL(storeDir).href },
      async () => {
        await rename(parent, `${parent}.away`);
        await writeFile(parent, 'not a folder\n');
      },
      async () => {
        await rm(parent);
        await rename(`${parent}.away`, parent);
      },
      storeDir,
    );
    expect(r.notReady, '/readyz says 503 while the store is broken').toBeGreaterThan(0);
  }, 180_000);

  it('S3 store: every write answered 503 SlowDown, then accepted again', async () => {
    s3 = await startS3rver();
    proxy = await startTrapProxy(s3.endpoint);
    const p = proxy;
    await throughOutage(
      's3',
      { ...s3.env, S3_ENDPOINT: p.endpoint },
      async () => p.fail((method) => method === 'PUT' || method === 'DELETE'),
      async () => p.fail(undefined),
    );
  }, 180_000);

  // A store broken at start-up must recover once repaired, without a restart (fs-store forgets a failed mkdir).
  it('filesystem store broken at start-up, repaired while running', async () => {
    const prefix = uniquePrefix('faults-store-boot');
    prefixes.push(prefix);
    const dataDir = await makeDataDir('faults-store-boot');
    const inbox = join(dataDir, 'inbox');
    const parent = join(dataDir, 'mnt');
    await writeFile(parent, 'not a folder yet\n');
    const port = await freePort();
    const env = baseEnv(dataDir, prefix, {
      STORE_URL: pathToFileURL(join(parent, 'store')).href,
      PORT: String(port),
      ODDSFILES_CONFIG: await writeFaultConfig(dataDir),
    });
    const svc = await startOddsfiles(env);
    running.push(svc);
    const feed = EXAMPLE_FEEDS[0]!;
    const bytes = docFor(feed, Date.now() - 60_000, 1000);
    await dropFile(inbox, feed.filename, bytes);
    await waitFor(() => svc.logs.some((l) => l.msg === 'drop will be retried'), 20_000, 'a failed attempt');
    await rm(parent);
    await mkdir(parent);
    const t0 = Date.now();
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 12_000, 'the drop published once the store is repaired');
    console.info(JSON.stringify({ test: 'faults.store', label: 'boot', recoverMs: Date.now() - t0 }));
    expect((await readCatalogAt(TEST_REDIS_URL, prefix)).get(feed.filename)).toBeDefined();
    expect(await svc.stop()).toBe(0);
  }, 120_000);
});
