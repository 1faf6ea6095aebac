/**
 * Fault 3: Redis goes away while drops arrive and readers serve. A private redis-server (never
 * the shared one on 6379), append-only like production, is
 *   A. paused (SIGSTOP) for 3 s: connections hang, nothing answers;
 *   B. stopped (SIGTERM) for 8 s and started again on the same port: connections refused;
 *   C. paused for 8 s: longer than BullMQ's drainDelay (5 s) + 1 s, the trigger of bullmq#4585.
 * Throughout: the reader keeps serving (200s during each outage, no torn body, no regression, no
 * 404 once served), /readyz says 503 during each outage; after each, every drop made meanwhile is
 * published without restarting oddsfiles. Recovery times are printed.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXAMPLE_FEEDS } from '../fixtures/corpus.js';
import {
  SLOW_FAULTS,
  VersionBook,
  createApiKey,
  freePort,
  httpGet,
  rejectionsIn,
  sleep,
  startDropStream,
  startPoller,
  startPrivateRedis,
  waitServesNewest,
  writeFaultConfig,
  type PrivateRedis,
} from '../helpers/faults.js';
import { pendingDrops } from '../helpers/drops.js';
import { uniquePrefix } from '../helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';

describe.runIf(SLOW_FAULTS)('fault: Redis outages while drops arrive and readers serve', () => {
  const prefix = uniquePrefix('faults-redis');
  let redis: PrivateRedis | undefined;
  let svc: RunningOddsfiles | undefined;

  afterAll(async () => {
    await svc?.kill();
    await redis?.stop();
  });

  it('keeps serving, says not ready, and publishes everything once Redis is back', async () => {
    const dataDir = await makeDataDir('faults-redis');
    const inbox = join(dataDir, 'inbox');
    redis = await startPrivateRedis(join(dataDir, 'private-redis'));
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const configFile = await writeFaultConfig(dataDir, 'ingest:\n  rescan: 1s\n');
    const env = baseEnv(dataDir, prefix, { REDIS_URL: redis.url, ODDSFILES_CONFIG: configFile, PORT: String(port) });
    const key = await createApiKey(env);
    svc = await startOddsfiles(env);
    const pid = svc.proc.pid;

    const book = new VersionBook();
    const seq = { n: 0 };
    const startMs = Math.floor(Date.now() / 1000) * 1000 - 30 * 86_400_000;
    const names = EXAMPLE_FEEDS.map((f) => f.filename);
    const poller = startPoller({ url: () => url, key, names, book, loops: 2, pauseMs: 5 });
    let stream = startDropStream({ inbox, feeds: EXAMPLE_FEEDS, perSecond: 40, book, startMs, seq });
    await sleep(1500);
    await stream.stop();
    await waitServesNewest(url, key, book, 30_000);

    const phases: Record<string, unknown>[] = [];
    const outage = async (name: string, ms: number, down: () => Promise<void> | void, up: () => Promise<void> | void) => {
      stream = startDropStream({ inbox, feeds: EXAMPLE_FEEDS, perSecond: 40, book, startMs, seq });
      await sleep(500);
      const okBefore = poller.report.ok;
      const droppedBefore = seq.n;
      await down();
      const t0 = Date.now();
      let notReady = 0;
      let readyChecks = 0;
      while (Date.now() - t0 < ms) {
        const r = await httpGet(`${url}/readyz`, {}, 3000).catch(() => undefined);
        readyChecks++;
        if (r?.status === 503) notReady++;
        await sleep(250);
      }
      const servedDuring = poller.report.ok - okBefore;
      await up();
      const back = Date.now();
      await sleep(300);
      await stream.stop();
      const droppedDuring = seq.n - droppedBefore;
      await waitServesNewest(url, key, book, 90_000);
      const recoverMs = Date.now() - back;
      await waitFor(async () => (await httpGet(`${url}/readyz`).catch(() => undefined))?.status === 200, 20_000, '/readyz 200 again');
      phases.push({ name, outageMs: ms, droppedDuring, servedDuring, readyChecks, notReady, recoverMs });
      console.info(JSON.stringify(phases.at(-1)));
      expect(servedDuring, `${name}: the reader served during the outage`).toBeGreaterThan(10);
      expect(notReady, `${name}: /readyz said 503 during the outage`).toBeGreaterThan(0);
    };

    await outage(
      'A: SIGSTOP 3s',
      3000,
      () => redis!.pause(),
      () => redis!.resume(),
    );
    await outage(
      'B: stopped 8s',
      8000,
      () => redis!.stop(),
      () => redis!.start(),
    );
    await outage(
      'C: SIGSTOP 8s',
      8000,
      () => redis!.pause(),
      () => redis!.resume(),
    );

    const report = await poller.stop();
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 30_000, 'an empty inbox and .processing');
    const replaced = svc.logs.filter((l) => typeof l.msg === 'string' && l.msg.includes('replacing it')).length;
    console.info(
      JSON.stringify({
        test: 'faults.redis',
        phases,
        supervisorReplacements: replaced,
        poller: { ...report, violations: report.violations.slice(0, 10), served: report.served.size },
      }),
    );
    // Never restarted: the same process did all of it.
    expect(svc.proc.pid).toBe(pid);
    expect(svc.proc.exitCode).toBeNull();
    expect(report.violations).toEqual([]);
    expect(await rejectionsIn(join(dataDir, 'rejected'))).toEqual([]);
    expect(await svc.stop()).toBe(0);
    svc = undefined;
  }, 300_000);
});
