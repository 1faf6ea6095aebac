/**
 * Stopping while Redis is away. The real command (every role) against a private redis-server
 * (never the shared one), stopped, a drop made meanwhile (the watcher's add waits for Redis), then
 * SIGTERM: the service must still stop within its shutdown timeout plus a few seconds (it waited
 * for Redis to come back before), and the drop must not be lost: it stays in the inbox and the
 * next start, Redis back, publishes it.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXAMPLE_FEEDS } from '../fixtures/corpus.js';
import { docFor, dropFile, freePort, sleep, startPrivateRedis, writeFaultConfig, type PrivateRedis } from '../helpers/faults.js';
import { pendingDrops } from '../helpers/drops.js';
import { uniquePrefix } from '../helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, type RunningOddsfiles } from '../helpers/service.js';

describe('fault: SIGTERM while Redis is away', () => {
  let redis: PrivateRedis | undefined;
  let svc: RunningOddsfiles | undefined;

  afterAll(async () => {
    await svc?.kill();
    await redis?.stop();
  });

  it('stops within the shutdown timeout, and the drop made meanwhile is published at the next start', async () => {
    const dataDir = await makeDataDir('faults-redis-stop');
    const inbox = join(dataDir, 'inbox');
    redis = await startPrivateRedis(join(dataDir, 'private-redis'));
    const configFile = await writeFaultConfig(dataDir, 'ingest:\n  rescan: 1s\n  shutdown_timeout: 2s\n');
    const env = baseEnv(dataDir, uniquePrefix('faults-redis-stop'), {
      REDIS_URL: redis.url,
      ODDSFILES_CONFIG: configFile,
      PORT: String(await freePort()),
      LOG_LEVEL: 'info',
    });
    svc = await startOddsfiles(env);

    await redis.stop();
    await sleep(500);
    const feed = EXAMPLE_FEEDS[0]!;
    await dropFile(inbox, feed.filename, docFor(feed, Date.now() - 60_000));
    await sleep(2500); // the file event's add and a rescan wait on Redis
    const t0 = Date.now();
    const code = await Promise.race([svc.stop(), sleep(25_000).then(() => 'still running' as const)]);
    const tookMs = Date.now() - t0;
    expect(code, 'exit status').toBe(0);
    // shutdown_timeout (2 s) + the grace (3 s) + a second for the step running then, and a little.
    expect(tookMs, 'time to stop').toBeLessThan(2000 + 3000 + 1000 + 3000);
    expect(svc.logs.some((l) => l.msg?.startsWith('stopping: Redis does not answer') === true)).toBe(true);
    expect((await pendingDrops(inbox)).length, 'the drop is still in the inbox').toBe(1);

    await redis.start();
    svc = await startOddsfiles(env);
    const published = await svc.waitForLog((l) => l.msg === 'drop published' && l.filename === feed.filename, 20_000);
    expect(published.outcome).toBe('published');
  });
});
