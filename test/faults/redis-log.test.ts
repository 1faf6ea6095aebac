/**
 * What an operator reads while Redis is away. The real command (`oddsfiles start`, every role, at
 * LOG_LEVEL=info) against a private redis-server (never the shared one on 6379), stopped for ~6 s
 * and started again on the same port, with a drop made during the outage:
 * - BullMQ's connection errors (ECONNREFUSED every 2 s per connection) give one `Redis connection
 *   lost` line at warn per connection and outage, with the error whole (type, code, stack), and one
 *   `Redis connection back` at info; no line at error, nothing on stderr;
 * - the drop made meanwhile is not refused: the watcher's add waits for Redis (ioredis' offline
 *   queue), so no `could not queue a drop` line; it is queued as soon as Redis is back and
 *   published once, its lag counted from the drop.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXAMPLE_FEEDS } from '../fixtures/corpus.js';
import { docFor, dropFile, freePort, sleep, startPrivateRedis, writeFaultConfig, type PrivateRedis } from '../helpers/faults.js';
import { pendingDrops } from '../helpers/drops.js';
import { uniquePrefix } from '../helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type LogLine, type RunningOddsfiles } from '../helpers/service.js';

const OUTAGE_MS = 6000;

describe('fault: the log through a Redis outage', () => {
  let redis: PrivateRedis | undefined;
  let svc: RunningOddsfiles | undefined;

  afterAll(async () => {
    await svc?.kill();
    await redis?.stop();
  });

  it('one warn when it starts, one info when it ends; a drop made meanwhile waits and is published', async () => {
    const dataDir = await makeDataDir('faults-redis-log');
    const inbox = join(dataDir, 'inbox');
    redis = await startPrivateRedis(join(dataDir, 'private-redis'));
    const configFile = await writeFaultConfig(dataDir, 'ingest:\n  rescan: 1s\n');
    const env = baseEnv(dataDir, uniquePrefix('faults-redis-log'), {
      REDIS_URL: redis.url,
      ODDSFILES_CONFIG: configFile,
      PORT: String(await freePort()),
      LOG_LEVEL: 'info',
    });
    svc = await startOddsfiles(env);
    const running = svc;
    const from = running.logs.length;
    const lines = (pred: (l: LogLine) => boolean) => running.logs.slice(from).filter(pred);

    await redis.stop();
    const down = Date.now();
    await sleep(1000);
    const feed = EXAMPLE_FEEDS[0]!;
    const dropped = Date.now();
    await dropFile(inbox, feed.filename, docFor(feed, Date.now() - 60_000));
    await sleep(Math.max(0, OUTAGE_MS - (Date.now() - down)));
    await redis.start();
    const up = Date.now();

    const published = await running.waitForLog((l) => l.msg === 'drop published' && l.filename === feed.filename, 20_000);
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 10_000, 'an empty inbox and .processing');

    // No line at error: connection errors are not the service's errors.
    expect(lines((l) => (l.level ?? 0) >= 50)).toEqual([]);
    expect(running.stderr()).not.toMatch(/ECONNREFUSED/);
    for (const connection of ['worker', 'queue']) {
      await running.waitForLog((l) => l.msg === 'Redis connection back' && l.connection === connection, 5000);
    }

    for (const connection of ['worker', 'queue']) {
      const lost = lines((l) => l.msg?.startsWith('Redis connection lost') === true && l.connection === connection);
      expect(lost, `${connection}: one 'lost' line for the outage`).toHaveLength(1);
      expect(lost[0]!.level).toBe(40);
      const err = lost[0]!.err as Record<string, unknown>;
      expect(err.type).toBe('Error');
      expect(err.code).toBe('ECONNREFUSED');
      expect(err.message).toMatch(/ECONNREFUSED/);
      expect(String(err.stack)).toMatch(/ECONNREFUSED/);
      const back = lines((l) => l.msg === 'Redis connection back' && l.connection === connection);
      expect(back, `${connection}: one 'back' line`).toHaveLength(1);
      expect(back[0]!.level).toBe(30);
      expect(back[0]!.downMs as number).toBeGreaterThan(OUTAGE_MS / 2);
    }

    // The drop: the watcher's add waited for Redis; nothing was refused, nothing logged for it.
    expect(lines((l) => l.msg === 'could not queue a drop; the rescan will retry')).toEqual([]);
    expect(published.lagMs as number).toBeGreaterThanOrEqual(up - dropped - 100);
    expect(lines((l) => l.msg === 'drop published' && l.filename === feed.filename)).toHaveLength(1);

    expect(await running.stop()).toBe(0);
    svc = undefined;
  }, 40_000);
});
