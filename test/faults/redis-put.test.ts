/**
 * Publishing over HTTPS while Redis is away. The real command (every role) against a private
 * redis-server (never the shared one). While Redis is stopped, a PUT and a dry run answer 503 with
 * Retry-After within `publish.queue_timeout` (they waited for Redis to come back before), and the
 * refused upload leaves nothing behind: once Redis is back it is not published (the queue's add,
 * held by the client meanwhile, finds no staged bytes), and sending it again publishes it. While
 * Redis is paused (connections open, nothing answering), a PUT is answered within the bound too,
 * and once no upload waits, the queue's events are no longer read.
 */
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { tinyDoc } from '../helpers/drops.js';
import { freePort, sleep, startPrivateRedis, writeFaultConfig, type PrivateRedis } from '../helpers/faults.js';
import { uniquePrefix } from '../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';

const LIVE = 'site_live_northwind_soccer.json';
const QUEUE_TIMEOUT_MS = 2000;

/**
 * BullMQ's QueueEvents connections, blocked reading the queue's events: named <prefix>:<queue>:qe,
 * and after a reconnection by the name of the connection they copy (publish-events).
 */
async function readingEvents(url: string): Promise<number> {
  const redis = new Redis(url);
  try {
    const list = (await redis.client('LIST')) as string;
    return list.split('\n').filter((l) => / name=[^ ]*(:qe|:publish-events) .* cmd=xread /.test(l)).length;
  } finally {
    redis.disconnect();
  }
}

describe('fault: PUT while Redis is away', () => {
  let redis: PrivateRedis | undefined;
  let svc: RunningOddsfiles | undefined;

  afterAll(async () => {
    await svc?.kill();
    await redis?.stop();
  });

  it('answers 503 within publish.queue_timeout, keeps nothing, and publishes the upload sent again once Redis is back', async () => {
    const dataDir = await makeDataDir('faults-redis-put');
    redis = await startPrivateRedis(join(dataDir, 'private-redis'));
    const configFile = await writeFaultConfig(dataDir, `publish: { queue_timeout: ${QUEUE_TIMEOUT_MS}ms, settle_timeout: 20s }\n`);
    const env = baseEnv(dataDir, uniquePrefix('faults-redis-put'), {
      REDIS_URL: redis.url,
      ODDSFILES_CONFIG: configFile,
      PORT: String(await freePort()),
      LOG_LEVEL: 'info',
    });
    svc = await startOddsfiles(env);
    const make = async (args: string[]) => {
      const res = await runCli(env, ['keys', 'create', ...args]);
      expect(res.code, res.stderr).toBe(0);
      return res.stdout.trim();
    };
    const publisher = await make(['--name', 'northwind-feed', '--publish', 'site_*_northwind*']);
    const reader = await make(['--name', 'reader', '--plan', 'pro']);
    const url = svc.url;
    const put = async (body: Buffer, query = '') => {
      const t0 = Date.now();
      const res = await fetch(`${url}/v1/data/${LIVE}${query}`, {
        method: 'PUT',
        headers: { 'x-api-key': publisher },
        body,
        signal: AbortSignal.timeout(60_000),
      });
      return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Record<string, unknown>, tookMs: Date.now() - t0 };
    };
    const served = async () => {
      const res = await fetch(`${url}/v1/data/${LIVE}`, { headers: { 'x-api-key': reader } });
      return res.status === 200 ? ((await res.json()) as { generated_at?: string }).generated_at : undefined;
    };

    const first = new Date(Date.now() - 60_000).toISOString();
    expect((await put(tinyDoc('northwind', 'soccer', first))).status).toBe(201);
    expect(await readingEvents(redis.url)).toBe(1);

    // Stopped: connections refused, the client holds its commands until it reconnects.
    await redis.stop();
    await sleep(300);
    const second = new Date(Date.now() - 30_000).toISOString();
    const refused = await put(tinyDoc('northwind', 'soccer', second));
    expect(refused.status, JSON.stringify(refused.body)).toBe(503);
    expect(refused.retryAfter).not.toBeNull();
    // The bound, and some room for a busy machine; before, it waited until Redis came back.
    expect(refused.tookMs).toBeLessThan(QUEUE_TIMEOUT_MS + 8000);
    const dry = await put(tinyDoc('northwind', 'soccer', second), '?dry_run=1');
    expect(dry.status, JSON.stringify(dry.body)).toBe(503);
    expect(dry.tookMs).toBeLessThan(QUEUE_TIMEOUT_MS + 8000);

    await redis.start();
    // The refused upload's add reaches Redis with the reconnection; its worker finds nothing staged.
    await svc.waitForLog((l) => l.msg === 'drop gone' && l.filename === LIVE, 30_000);
    expect(await served()).toBe(first);

    // Paused: connected, nothing answers.
    redis.pause();
    const third = new Date(Date.now() - 20_000).toISOString();
    const paused = await put(tinyDoc('northwind', 'soccer', third));
    redis.resume();
    expect([503, 504], JSON.stringify(paused.body)).toContain(paused.status);
    expect(paused.tookMs).toBeLessThan(QUEUE_TIMEOUT_MS + 8000);

    // Sent again with Redis back: published.
    await waitFor(async () => (await put(tinyDoc('northwind', 'soccer', second))).status !== 503, 30_000, 'a PUT accepted again');
    await waitFor(async () => (await served()) !== first, 30_000, 'a newer version served');
    const now = await served();
    expect([second, third]).toContain(now);
    // The queue's events are read only while uploads wait: the ones queued late let go of them too.
    await waitFor(async () => (await readingEvents(redis!.url)) === 0, 40_000, 'the events reading closed once no upload waits');
  });
});
