/**
 * Every Redis key and channel the service uses, under REDIS_PREFIX, in one place. BullMQ's own
 * keys live under `<prefix>:<queue>:*` (the queue names below never clash with these).
 */
export interface RedisKeys {
  readonly prefix: string;
  /** Hash: filename → catalog entry (JSON). */
  readonly catalog: string;
  /** Counter bumped on every published change. */
  readonly catalogSeq: string;
  /**
   * The catalog's epoch: set when the catalog was restored from the store (restore.ts). A catalog
   * without it (a Redis that lost its data, a new Redis) takes no commit until restored.
   */
  readonly catalogEpoch: string;
  /** List of a filename's version hashes, newest first. */
  catalogVersions(filename: string): string;
  /**
   * Sorted set: a filename's retained publications (history-index.ts), scored by published_at ms;
   * members `<publishedMs>:<seq>:<sha256>:<size>:<generatedAtMs>`.
   */
  history(filename: string): string;
  /** Hash: `n:<sha256>` → how many retained publications use it; `m:<etag hex>` → the latest one; `built` once rebuilt. */
  historyRefs(filename: string): string;
  /** Pub/sub channel announcing catalog changes. */
  readonly catalogChannel: string;
  /** Stream: every published change under the id `<seq>-0` (the change log behind /v1/changes and /v1/stream). */
  readonly changeLog: string;
  /** One reader's change-endpoint figures (JSON, expiring), for `status`; `*` for the pattern of all. */
  readerStats(id: string): string;
  /** Pub/sub channel carrying a version's bytes to readers, sent ahead of its commit (carried.ts). */
  readonly catalogBytesChannel: string;
  /** Sorted set of recent rejections (score: time), JSON members. */
  readonly rejections: string;
  /** Sorted set of recent superseded drops (score: time), JSON members. */
  readonly superseded: string;
  /** Hash: key id → key record (JSON). */
  readonly apiKeys: string;
  /** Hash: sha256 of a key → key id. */
  readonly apiKeyHashes: string;
  /** Pub/sub channel announcing key changes (revocations). */
  readonly apiKeysChannel: string;
  /** Rate-limit counters. */
  rate(scope: string, id: string): string;
  /** Sorted set: the open /v1/stream slots of a key on every reader (member), scored by when each lapses (Redis's clock). */
  streamSlots(rateKey: string): string;
  /**
   * Sorted set: the worker processes watching the inbox whose marker holds this id (member), each
   * scored by when its registration lapses (Redis's clock); the key expires with the last of them.
   */
  inbox(id: string): string;
  /**
   * Sorted set: where the running worker processes watch, one JSON member `{worker, host, inbox}`
   * per process (inbox: the absolute path on that host), scored as inbox(id); for messages only.
   */
  readonly inboxes: string;
  /** Sorted set: every process of the service (`<roles>@<host>:<pid>`), scored by when it last said it runs (ms). */
  readonly processes: string;
}

export function redisKeys(prefix: string): RedisKeys {
  return {
    prefix,
    catalog: `${prefix}:catalog`,
    catalogSeq: `${prefix}:catalog:seq`,
    catalogEpoch: `${prefix}:catalog:epoch`,
    catalogVersions: (filename) => `${prefix}:catalog:versions:${filename}`,
    history: (filename) => `${prefix}:history:${filename}`,
    historyRefs: (filename) => `${prefix}:historyrefs:${filename}`,
    catalogChannel: `${prefix}:catalog:changes`,
    changeLog: `${prefix}:catalog:log`,
    readerStats: (id) => `${prefix}:readers:changes:${id}`,
    catalogBytesChannel: `${prefix}:catalog:bytes`,
    rejections: `${prefix}:rejections`,
    superseded: `${prefix}:superseded`,
    apiKeys: `${prefix}:apikeys`,
    apiKeyHashes: `${prefix}:apikeys:hashes`,
    apiKeysChannel: `${prefix}:apikeys:changes`,
    rate: (scope, id) => `${prefix}:rate:${scope}:${id}`,
    streamSlots: (rateKey) => `${prefix}:streams:${rateKey}`,
    inbox: (id) => `${prefix}:inbox:${id}`,
    inboxes: `${prefix}:inboxes`,
    processes: `${prefix}:processes`,
  };
}

/** BullMQ queue names. */
export const INGEST_QUEUE = 'ingest';
