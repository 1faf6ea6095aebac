/**
 * A capped log of recent records in Redis, newest last (a sorted set scored by receive time, JSON
 * members, the oldest beyond KEEP dropped on each write): the rejections and superseded drops that
 * `oddsfiles status` shows.
 */
import type { Redis } from 'ioredis';

const KEEP = 1000;

export interface RecentLog<T> {
  record(r: T): Promise<void>;
  /** The newest `count`, newest first. */
  latest(count: number): Promise<T[]>;
  /** Remove one as it was recorded. */
  remove(r: T): Promise<void>;
  /** Remove those `matches` picks (the log is small: KEEP entries). */
  removeWhere(matches: (r: T) => boolean): Promise<void>;
}

export function createRecentLog<T extends { readonly received_at: string }>(redis: Redis, key: string): RecentLog<T> {
  return {
    async record(r) {
      await redis
        .multi()
        .zadd(key, Date.parse(r.received_at) || Date.now(), JSON.stringify(r))
        .zremrangebyrank(key, 0, -KEEP - 1)
        .exec();
    },
    async latest(count) {
      const members = await redis.zrevrange(key, 0, count - 1);
      return members.map((m) => JSON.parse(m) as T);
    },
    async remove(r) {
      await redis.zrem(key, JSON.stringify(r));
    },
    async removeWhere(matches) {
      const members = await redis.zrange(key, 0, -1);
      const gone = members.filter((m) => {
        try {
          return matches(JSON.parse(m) as T);
        } catch {
          return false;
        }
      });
      if (gone.length > 0) await redis.zrem(key, ...gone);
    },
  };
}
