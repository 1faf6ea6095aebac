/**
 * The last rejections, kept in Redis for `oddsfiles status` (REJECTED_DIR stays the record). An
 * entry leaves when its drop leaves REJECTED_DIR: sent back by `rejected retry`, or purged.
 */
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../../redis/key-names.js';
import type { RejectionRecord } from './rejected.js';
import { createRecentLog } from './recent-log.js';

export function createRejectionLog(redis: Redis, keys: RedisKeys) {
  const log = createRecentLog<RejectionRecord>(redis, keys.rejections);
  return {
    record: log.record,
    /** Forget one (its rejection was withdrawn); `r` as recorded. */
    remove: log.remove,
    latest: log.latest,
    /** Remove the entries of these rejections (ids of REJECTED_DIR). */
    async forget(ids: Iterable<string>): Promise<void> {
      const wanted = new Set(ids);
      if (wanted.size > 0) await log.removeWhere((r) => wanted.has(r.id));
    },
  };
}
