/**
 * with REDIS_URL unset and nothing answering at the default address, `start` runs a
 * private redis-server under DATA_DIR/redis (append-only) and stops it on exit; other commands
 * find it through DATA_DIR/redis/redis.url; without it they say how to get Redis.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RedisUnavailableError } from '../../src/errors.js';
import { redisAnswers } from '../../src/redis/connect.js';
import { resolveRedis } from '../../src/redis/private-server.js';
import { makeDataDir } from '../helpers/service.js';

// A port nothing listens on stands in for "nothing answers at the default".
const DEAD = 'redis://127.0.0.1:1';

describe('private redis-server', () => {
  it('starts one when nothing answers, records its address, and stops it', async () => {
    const dataDir = await makeDataDir('private-redis');
    const config = { dataDir, redis: { url: DEAD, explicit: false, prefix: 'x' } };
    const started = await resolveRedis(config, { startPrivate: true });
    try {
      expect(started.privateServer).toBeDefined();
      expect(started.url).not.toBe(DEAD);
      expect(await redisAnswers(started.url)).toBe(true);
      expect((await readFile(join(dataDir, 'redis', 'redis.url'), 'utf8')).trim()).toBe(started.url);
      // Another command (startPrivate: false) finds the running one instead of failing.
      const found = await resolveRedis(config, { startPrivate: false });
      expect(found.url).toBe(started.url);
      expect(found.privateServer).toBeUndefined();
    } finally {
      await started.privateServer?.stop();
    }
    expect(await redisAnswers(started.url)).toBe(false);
    expect(existsSync(join(dataDir, 'redis', 'redis.url'))).toBe(false);
    expect(existsSync(join(dataDir, 'redis', 'appendonlydir'))).toBe(true);
  });

  it('never falls back when REDIS_URL is set, and explains how to get Redis otherwise', async () => {
    const dataDir = await makeDataDir('private-redis-2');
    const explicit = await resolveRedis({ dataDir, redis: { url: DEAD, explicit: true, prefix: 'x' } }, { startPrivate: true });
    expect(explicit).toEqual({ url: DEAD, privateServer: undefined });
    const err = await resolveRedis({ dataDir, redis: { url: DEAD, explicit: false, prefix: 'x' } }, { startPrivate: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RedisUnavailableError);
    expect((err as Error).message).toMatch(/apt-get install -y redis-server|REDIS_URL/);
  });
});
