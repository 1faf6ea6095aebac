/**
 * The last rejections, kept in Redis for `oddsfiles status` (REJECTED_DIR stays the record). An
 * entry leaves when its drop leaves REJECTED_DIR: sent back by `rejected retry`, or purged.
 */
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/keys.js';
import type { RejectionRecord } from './rejected.js';

const KEEP = 1000;

export function createRejectionLog(redis: Redis, keys: RedisKeys) {
  return {
    async record(r: RejectionRecord): Promise<void> {
      await redis
        .multi()
        .zadd(keys.rejections, Date.parse(r.received_at) || Date.now(), JSON.stringify(r))
        .zremrangebyrank(keys.rejections, 0, -KEEP - 1)
        .exec();
    },
    /** Forget one (its rejection was withdrawn); `r` as recorded. */
    async remove(r: RejectionRecord): Promise<void> {
      await redis.zrem(keys.rejections, JSON.stringify(r));
    },
    async latest(count: number): Promise<RejectionRecord[]> {
      const members = await redis.zrevrange(keys.rejections, 0, count - 1);
      return members.map((m) => JSON.parse(m) as RejectionRecord);
    },
    /** Remove the entries of these rejections (ids of REJECTED_DIR); the log is small (KEEP entries). */
    async forget(ids: Iterable<string>): Promise<void> {
      const wanted = new Set(ids);
      if (wanted.size === 0) return;
      const members = await redis.zrange(keys.rejections, 0, -1);
      const gone = members.filter((m) => {
        try {
          return wanted.has((JSON.parse(m) as RejectionRecord).id);
        } catch {
          return false;
        }
      });
      if (gone.length > 0) await redis.zrem(keys.rejections, ...gone);
    },
  };
}
