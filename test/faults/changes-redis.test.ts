/**
 * The change feed through a Redis outage, against `oddsfiles start` and a private redis-server:
 * open streams stay open (heartbeats go on), no change is lost or skipped, and what is published
 * after Redis returns reaches them in order; a long-poll held across the outage is answered. A
 * Redis that comes back without its data (the catalog restored from the store, the log in a new
 * epoch) ends the streams with `reset`, never handing a position the client cannot resume from.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXAMPLE_FEEDS } from '../fixtures/corpus.js';
import { createApiKey, docFor, dropFile, freePort, sleep, startPrivateRedis, writeFaultConfig, type PrivateRedis } from '../helpers/faults.js';
import { uniquePrefix } from '../helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';
import { openSse, type SseClient } from '../helpers/sse.js';

describe('fault: the change feed while Redis is away', () => {
  let redis: PrivateRedis | undefined;
  let svc: RunningOddsfiles | undefined;
  let key = '';
  let env: Record<string, string> = {};
  const clients: SseClient[] = [];

  afterAll(async () => {
    for (const c of clients) c.close();
    await svc?.kill();
    await redis?.stop();
  });

  it('keeps streams open through an outage and delivers every change, in order, once Redis is back', async () => {
    const dataDir = await makeDataDir('faults-changes-redis');
    const inbox = join(dataDir, 'inbox');
    redis = await startPrivateRedis(join(dataDir, 'private-redis'));
    const configFile = await writeFaultConfig(dataDir, 'changes: { heartbeat: 250ms }\n');
    env = baseEnv(dataDir, uniquePrefix('faults-changes-redis'), { REDIS_URL: redis.url, ODDSFILES_CONFIG: configFile, PORT: String(await freePort()) });
    svc = await startOddsfiles(env);
    key = await createApiKey(env);
    let t = Date.now() - 600_000;
    // A file of its own per drop: a drop replaced in the inbox before it is claimed is never published.
    let n = 0;
    const publish = () => {
      const feed = EXAMPLE_FEEDS[n++]!;
      return dropFile(inbox, feed.filename, docFor(feed, (t += 1000)));
    };

    const stream = await openSse(`${svc.url}/v1/stream`, { 'x-api-key': key });
    clients.push(stream);
    expect(stream.status).toBe(200);
    await publish();
    await stream.next((e) => e.id === '1');

    // A long-poll held across the outage.
    const held = fetch(`${svc.url}/v1/changes?since=1&wait=30`, { headers: { 'x-api-key': key } });
    await sleep(200);
    await redis.stop();
    const beats = stream.comments;
    await sleep(3000);
    expect(stream.comments - beats, 'heartbeats while Redis is away').toBeGreaterThanOrEqual(5);
    // Dropped meanwhile: published once Redis is back.
    await publish();
    await redis.start();
    await publish();
    await stream.next((e) => e.id === '3', 20_000);
    const answered = await held;
    expect(answered.status).toBe(200);
    expect(((await answered.json()) as { changes: { position: number }[] }).changes[0]!.position).toBe(2);
    expect(stream.events.filter((e) => e.event === 'change').map((e) => e.id)).toEqual(['1', '2', '3']);
    expect(stream.events.some((e) => e.event !== 'change')).toBe(false);
  }, 60_000);

  it('tells streams to start again when Redis comes back without its data, and refuses positions it lost', async () => {
    const stream = await openSse(`${svc!.url}/v1/stream`, { 'x-api-key': key });
    clients.push(stream);
    expect(stream.status).toBe(200);
    await redis!.stop();
    await rm(join(redis!.dir, 'appendonlydir'), { recursive: true, force: true });
    await redis!.start();
    // The worker restores the catalog from the store: the change log starts a new epoch.
    await stream.next((e) => e.event === 'reset', 20_000);
    await stream.ended;
    // The keys were restored from the store too; the old position is refused, not served: before
    // the restore as ahead of the log, after it as older than the new epoch's first position.
    const refused = await waitFor(async () => {
      const gone = await fetch(`${svc!.url}/v1/changes?since=3`, { headers: { 'x-api-key': key } });
      const body = gone.status === 410 ? ((await gone.json()) as { oldest: number; position: number }) : undefined;
      return body && body.position > 3 ? body : undefined;
    }, 20_000);
    expect(refused.oldest).toBeGreaterThan(3);
  }, 60_000);
});
