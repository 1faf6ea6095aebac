/**
 * A file's recent versions as the catalog lists them: `catalog:versions:<filename>`, the sha256 of
 * each version still kept in the store, newest first (written by the catalog's commit). Readers use
 * it to find the version a client's ETag names (the base of a delta).
 */
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/key-names.js';

export interface RecentVersions {
  /** The sha256s of `filename`'s newest `n` versions, newest first (empty when none is listed). */
  shas(filename: string, n: number): Promise<string[]>;
}

export function createRecentVersions(redis: Pick<Redis, 'lrange'>, keys: Pick<RedisKeys, 'catalogVersions'>): RecentVersions {
  return {
    shas: (filename, n) => redis.lrange(keys.catalogVersions(filename), 0, Math.max(0, n - 1)),
  };
}
