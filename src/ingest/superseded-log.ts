/** The last superseded drops, kept in Redis for `oddsfiles status`: which published generated_at won. */
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/keys.js';

const KEEP = 1000;

export interface SupersededRecord {
  readonly filename: string;
  /** The drop's generated_at, older than the published one. */
  readonly generated_at: string;
  /** The published version's generated_at, which won. */
  readonly published_generated_at: string;
  readonly received_at: string;
}

export function createSupersededLog(redis: Redis, keys: RedisKeys) {
  return {
    async record(r: SupersededRecord): Promise<void> {
      await redis
        .multi()
        .zadd(keys.superseded, Date.parse(r.received_at) || Date.now(), JSON.stringify(r))
        .zremrangebyrank(keys.superseded, 0, -KEEP - 1)
        .exec();
    },
    async latest(count: number): Promise<SupersededRecord[]> {
      const members = await redis.zrevrange(keys.superseded, 0, count - 1);
      return members.map((m) => JSON.parse(m) as SupersededRecord);
    },
  };
}
