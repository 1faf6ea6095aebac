/** The last rejections, kept in Redis for `oddsfiles status` (REJECTED_DIR stays the record). */
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
  };
}
