/**
 * Fault 5: an event storm. 10,000 files land in the inbox in one burst while the service is
 * frozen (SIGSTOP), so the kernel's inotify queue (/proc/sys/fs/inotify/max_queued_events, 16384
 * by default; each drop costs ~5 events: create, modify, close, moved-from, moved-to) overflows
 * for certain and events are lost. Every file must still be processed, thanks to the rescan:
 * published (a generated registry of 500 bookmakers × 10 sports gives 10,000 feed names), with
 * the inbox and .processing empty, and nothing rejected. Throughput and memory are printed.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { SLOW_FAULTS, createApiKey, docFor, dropFile, freePort, httpGet, memoryOf, rejectionsIn, writeFaultConfig, type FeedLike } from '../helpers/faults.js';
import { pendingDrops } from '../helpers/drops.js';
import { TEST_REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';

const BOOKMAKERS = SLOW_FAULTS ? 500 : 50;
const SPORTS = 10;

describe('fault: an event storm larger than the inotify queue', () => {
  const prefix = uniquePrefix('faults-storm');
  let svc: RunningOddsfiles | undefined;

  afterAll(async () => {
    if (svc?.proc.pid) process.kill(svc.proc.pid, 'SIGCONT');
    await svc?.kill();
    await dropPrefix(prefix);
  });

  it(`processes every one of ${BOOKMAKERS * SPORTS * 2} files dropped in one burst`, async () => {
    const dataDir = await makeDataDir('faults-storm');
    const inbox = join(dataDir, 'inbox');
    const sports = Array.from({ length: SPORTS }, (_, i) => `sport${i}`);
    const bookmakers = Array.from({ length: BOOKMAKERS }, (_, i) => `bk${String(i).padStart(4, '0')}`);
    const yaml = [
      'bookmakers:',
      ...bookmakers.map((k) => `  - { key: ${k}, name: ${k}, feeds: split }`),
      `sports: [${sports.join(', ')}]`,
      'ingest:',
      '  rescan: 2s',
      // Publishing is bound by two fsyncs per version: more jobs at once for a burst.
      '  concurrency: 16',
      '',
    ].join('\n');
    const configFile = await writeFaultConfig(dataDir, yaml);
    const port = await freePort();
    const env = baseEnv(dataDir, prefix, { ODDSFILES_CONFIG: configFile, PORT: String(port) });
    const key = await createApiKey(env);
    svc = await startOddsfiles(env);
    const pid = svc.proc.pid!;

    const feeds: FeedLike[] = [];
    for (const b of bookmakers)
      for (const s of sports) for (const kind of ['live', 'pregame']) feeds.push({ filename: `site_${kind}_${b}_${s}.json`, bookmaker: b, sport: s });
    const at = Math.floor(Date.now() / 1000) * 1000 - 3_600_000;
    const maxQueued = Number((await readFile('/proc/sys/fs/inotify/max_queued_events', 'utf8')).trim());

    // Frozen: it reads no inotify event while the burst lands, so the kernel queue overflows.
    process.kill(pid, 'SIGSTOP');
    const tDrop = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < feeds.length) {
          const f = feeds[next++]!;
          await dropFile(inbox, f.filename, docFor(f, at, 300));
        }
      }),
    );
    const dropMs = Date.now() - tDrop;
    process.kill(pid, 'SIGCONT');
    const t0 = Date.now();

    const redis = new Redis(TEST_REDIS_URL);
    let peakMb = 0;
    try {
      await waitFor(
        async () => {
          peakMb = Math.max(peakMb, memoryOf(pid).rssMb);
          return (await redis.hlen(`${prefix}:catalog`)) === feeds.length;
        },
        240_000,
        `${feeds.length} feeds published`,
        250,
      );
    } finally {
      redis.disconnect();
    }
    const publishMs = Date.now() - t0;
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 60_000, 'an empty inbox and .processing');
    const settleMs = Date.now() - t0;
    const list = await waitFor(
      async () => {
        const r = await httpGet(`http://127.0.0.1:${port}/v1/files`, { 'x-api-key': key });
        const files = (JSON.parse(r.body.toString('utf8')) as { files: string[] }).files;
        return files.length === feeds.length ? files : undefined;
      },
      60_000,
      'the reader listing every file',
    );
    const mem = memoryOf(pid);
    console.info(
      JSON.stringify({
        test: 'faults.storm',
        files: feeds.length,
        maxQueuedEvents: maxQueued,
        dropMs,
        publishMs,
        settleMs,
        filesPerSecond: Math.round(feeds.length / (settleMs / 1000)),
        rssMb: Math.round(mem.rssMb),
        peakRssMb: Math.round(Math.max(peakMb, mem.peakMb)),
      }),
    );
    expect(list).toHaveLength(feeds.length);
    expect(await rejectionsIn(join(dataDir, 'rejected'))).toEqual([]);
    expect(await svc.stop()).toBe(0);
    svc = undefined;
  }, 400_000);
});
