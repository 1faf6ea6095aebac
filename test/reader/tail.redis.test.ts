/**
 * The change log's tail (src/reader/changes/tail.ts) against a real Redis, through a failed read:
 * a Redis that lost its last writes and gave their positions to new changes is told apart from one
 * that was only away, although its head is past the tail's position again by the time it reads.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createChangeLog, type ChangeLog, type LoggedChange } from '../../src/catalog/change-log.js';
import { startTail, type Tail } from '../../src/reader/changes/tail.js';
import { redisKeys } from '../../src/redis/key-names.js';
import { createLogger } from '../../src/log.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/service.js';

const prefix = uniquePrefix('tail');
const keys = redisKeys(prefix);
const redis = new Redis(TEST_REDIS_URL);

/** A change as the catalog's commit appends it, and the catalog's seq moved to it. */
async function append(seq: number, filename: string, sha256: string): Promise<void> {
  const entry = { filename, sha256, size: 1, generatedAt: '2026-11-29T00:00:00Z', generatedAtMs: 0, publishedAt: '2026-11-29T00:00:00Z' };
  await redis.xadd(keys.changeLog, `${seq}-0`, 'e', JSON.stringify(entry), 'p', '', 't', '0');
  await redis.set(keys.catalogSeq, String(seq));
}

describe('the change log tail after a failed read', () => {
  let tail: Tail | undefined;

  afterEach(() => tail?.close());
  afterAll(async () => {
    await dropPrefix(prefix);
    redis.disconnect();
  });

  /** A tail whose next read, once `failWith` is set, runs it and then fails as a lost connection does. */
  function follow(): { taken: LoggedChange[]; resets: number[]; failWith: (during: () => Promise<void>) => void } {
    const log = createChangeLog(redis, keys);
    let during: (() => Promise<void>) | undefined;
    const reads: ChangeLog = {
      ...log,
      async read(after, count, blockMs) {
        const fault = during;
        if (fault) {
          during = undefined;
          await fault();
          throw new Error('Connection is closed.');
        }
        return log.read(after, count, blockMs);
      },
    };
    const taken: LoggedChange[] = [];
    const resets: number[] = [];
    tail = startTail({
      tail: reads,
      log,
      logger: createLogger({ level: 'silent' }),
      blockMs: 100,
      start: () => undefined,
      reset: (to) => resets.push(to),
      take: (c) => taken.push(c),
      read: () => undefined,
    });
    return { taken, resets, failWith: (f) => (during = f) };
  }

  it('reads on after an outage that lost nothing: every change once, no reset', async () => {
    await redis.del(keys.changeLog, keys.catalogSeq);
    const t = follow();
    await tail!.ready;
    for (let seq = 1; seq <= 3; seq++) await append(seq, `f${seq}.json`, `a${seq}`);
    await waitFor(() => t.taken.length === 3);
    t.failWith(async () => {
      for (let seq = 4; seq <= 5; seq++) await append(seq, `f${seq}.json`, `a${seq}`);
    });
    await waitFor(() => t.taken.length === 5);
    expect(t.taken.map((c) => c.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(t.resets).toEqual([]);
  });

  it('resets when the log lost its last changes and gave their positions to others', async () => {
    await redis.del(keys.changeLog, keys.catalogSeq);
    const t = follow();
    await tail!.ready;
    for (let seq = 1; seq <= 3; seq++) await append(seq, 'site_live_northwind_soccer.json', `v${seq}`);
    await waitFor(() => t.taken.length === 3);
    // Redis comes back without positions 2 and 3, and new publications take 2..5.
    // (The stream as an older copy of Redis has it: its last id 1-0 too.)
    t.failWith(async () => {
      await redis.del(keys.changeLog);
      await append(1, 'site_live_northwind_soccer.json', 'v1');
      for (let seq = 2; seq <= 5; seq++) await append(seq, `other${seq}.json`, `o${seq}`);
    });
    await waitFor(() => t.resets.length > 0);
    expect(t.resets).toEqual([5]);
    // Nothing of the new log handed on as if it followed position 3.
    expect(t.taken.map((c) => c.seq)).toEqual([1, 2, 3]);
  });
});
