/** The last superseded drops, kept in Redis for `oddsfiles status`: which published generated_at won. */
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../../redis/key-names.js';
import { createRecentLog } from './recent-log.js';

export interface SupersededRecord {
  readonly filename: string;
  /** The drop's generated_at, older than the published one. */
  readonly generated_at: string;
  /** The published version's generated_at, which won. */
  readonly published_generated_at: string;
  readonly received_at: string;
}

export function createSupersededLog(redis: Redis, keys: RedisKeys) {
  const log = createRecentLog<SupersededRecord>(redis, keys.superseded);
  return { record: log.record, latest: log.latest };
}
