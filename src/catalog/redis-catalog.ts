/**
 * The published index in Redis. The newest-wins rule is enforced in one Lua script (commit-script.ts), so it
 * holds whatever the number of workers and whatever the order their jobs finish in.
 */
import type { Redis } from 'ioredis';
import { OddsfilesError } from '../errors.js';
import { isNoScript, luaScript } from '../redis/cached-script.js';
import type { RedisKeys } from '../redis/key-names.js';
import { encodeCarried } from './carried.js';
import { changeEntryOf } from './change-log.js';
import { COMMIT_LUA } from './commit-script.js';
import { createHistoryIndex, type HistoryIndex } from './history-index.js';
import type { CatalogChange, CatalogEntry, CatalogSnapshot, CommitOutcome, CommitResult } from './types.js';

/** Run by its SHA-1 with every publication (cached-script.ts). */
const commitScript = luaScript(COMMIT_LUA);

// KEYS: catalog hash, seq counter. A consistent snapshot: entries and seq read atomically.
const SNAPSHOT_LUA = `
return {redis.call('GET', KEYS[2]) or '0', redis.call('HGETALL', KEYS[1])}
`;

export interface Catalog {
  commit(entry: CatalogEntry, keepVersions: number): Promise<CommitResult>;
  /**
   * Send a version's bytes to the readers of other processes ahead of its commit (carried.ts);
   * resolves to how many received them. Called before `commit` on the same connection, so every
   * subscriber has them before the announcement.
   */
  carry(sha256: string, bytes: Buffer): Promise<number>;
  get(filename: string): Promise<CatalogEntry | undefined>;
  /** The entries of several filenames in one round trip (HMGET), in the order asked. */
  getMany(filenames: readonly string[]): Promise<(CatalogEntry | undefined)[]>;
  snapshot(): Promise<CatalogSnapshot>;
  /** The same snapshot with each entry as stored (its JSON, unparsed), sorted by filename. */
  snapshotJson(): Promise<CatalogJsonSnapshot>;
  seq(): Promise<number>;
  /** Every retained publication of each file (history-index.ts). */
  readonly history: HistoryIndex;
}

export interface CatalogJsonSnapshot {
  readonly seq: number;
  /** [filename, entry JSON], sorted by filename. */
  readonly entries: readonly (readonly [string, string])[];
}

/** How long and how far the change log is kept (config.changes); without it the log is never trimmed. */
export interface ChangeLogLimits {
  readonly maxEntries: number;
  readonly retentionMs: number;
}

/** How long and how many versions of each file are kept (config.history); without it, 7 days and 20,000. */
export interface HistoryLimits {
  readonly retentionMs: number;
  readonly maxVersions: number;
}

/** What a commit waits for (the workers' catalog); none by default. */
export interface CommitOptions {
  /**
   * Commit only into a catalog restored from the store (it has an epoch): a Redis that lost its
   * data takes no commit before the restore, which would otherwise leave the store's versions out.
   */
  readonly requireEpoch?: boolean;
  /** A published commit is acknowledged only once this many replicas have it (WAIT); 0: none. */
  readonly waitReplicas?: number;
  readonly waitTimeoutMs?: number;
}

export function createCatalog(redis: Redis, keys: RedisKeys, changeLog?: ChangeLogLimits, history?: HistoryLimits, options: CommitOptions = {}): Catalog {
  const historyMax = history?.maxVersions ?? 20_000;
  const historyRetentionMs = history?.retentionMs ?? 7 * 86_400_000;
  const waitReplicas = options.waitReplicas ?? 0;
  const waitTimeoutMs = options.waitTimeoutMs ?? 2000;
  /** When the last wait fell short, and how many replicas confirmed then. */
  let short: { n: number; at: number } | undefined;
  const notReplicated = (n: number) =>
    new OddsfilesError(
      'redis.not_replicated',
      `the commit reached ${n} of ${waitReplicas} replicas within ${waitTimeoutMs} ms (redis.wait_replicas); published but not acknowledged, will retry`,
    );
  /**
   * Acknowledged means kept: a publication is acknowledged only once the replicas a failover may
   * promote have its commit (WAIT). Short of that, it is published (readers have it) but not
   * acknowledged: the drop is retried, and acknowledged once the replicas confirm. Within a second
   * of a wait that fell short, commits fail at once instead of each waiting out the timeout (the
   * connection would queue every commit behind it). An `unchanged` answer may be the retry of such
   * a commit: it waits too.
   */
  const replicated = async () => {
    if (short && Date.now() - short.at < 1000) throw notReplicated(short.n);
    const acked = await redis.wait(waitReplicas, waitTimeoutMs);
    if (acked >= waitReplicas) {
      short = undefined;
      return;
    }
    short = { n: acked, at: Date.now() };
    throw notReplicated(acked);
  };
  /**
   * The highest seq seen here, by a commit or a read of the seq. Replies come back in the order
   * the commands were sent (one connection), so a published seq at or below it, or any other seq
   * below it, means the counter went back: Redis lost commits. Reset to the seq seen then, so the
   * next commit that returns says it once (the one that saw it, unless its wait for replicas failed).
   */
  let highest = 0;
  let wentBack = false;
  const seen = (seq: number, published = false) => {
    const back = published ? seq <= highest : seq < highest;
    if (back || seq > highest) highest = seq;
    if (back) wentBack = true;
    return seq;
  };
  return {
    history: createHistoryIndex(redis, keys),
    async commit(entry, keepVersions) {
      const json = JSON.stringify(entry);
      const publishedMs = Date.parse(entry.publishedAt);
      const args = [
        keys.catalog,
        keys.catalogSeq,
        keys.catalogVersions(entry.filename),
        keys.changeLog,
        keys.history(entry.filename),
        keys.historyRefs(entry.filename),
        keys.catalogEpoch,
        entry.filename,
        json,
        String(entry.generatedAtMs),
        entry.sha256,
        String(keepVersions),
        keys.catalogChannel,
        String(Number.isFinite(publishedMs) ? publishedMs : Date.now()),
        String(changeLog?.maxEntries ?? 0),
        String(changeLog ? Date.now() - changeLog.retentionMs : 0),
        JSON.stringify(changeEntryOf(entry)),
        entry.sourceSha256 ?? '',
        String(entry.size),
        String(historyMax),
        String(Date.now() - historyRetentionMs),
        options.requireEpoch ? '1' : '',
      ];
      // EVALSHA (EVAL once Redis forgot the script), each awaited itself: see cached-script.ts.
      let raw: unknown;
      try {
        raw = await redis.evalsha(commitScript.sha1, 7, ...args);
      } catch (err) {
        if (!isNoScript(err)) throw err;
        raw = await redis.eval(commitScript.lua, 7, ...args);
      }
      const reply = raw as string[];
      const [outcome, current, seq, member, count, ...rest] = reply;
      if (outcome === 'unready') {
        throw new OddsfilesError(
          'redis.not_restored',
          'the catalog in Redis has not been restored from the store yet (Redis lost its data, or is new); will retry',
        );
      }
      seen(Number(seq), outcome === 'published');
      if (outcome !== 'superseded' && waitReplicas > 0) await replicated();
      const behind = wentBack;
      wentBack = false;
      const n = Number(count ?? 0);
      return {
        outcome: outcome as CommitOutcome,
        current: JSON.parse(current as string) as CatalogEntry,
        seq: Number(seq),
        evicted: rest.slice(0, n),
        ...(outcome === 'published' ? { history: { added: member as string, removed: rest.slice(n) } } : {}),
        ...(behind ? { behind: true as const } : {}),
      };
    },
    async carry(sha256, bytes) {
      return redis.publish(keys.catalogBytesChannel, encodeCarried(sha256, bytes));
    },
    async get(filename) {
      const json = await redis.hget(keys.catalog, filename);
      return json ? (JSON.parse(json) as CatalogEntry) : undefined;
    },
    async getMany(filenames) {
      if (filenames.length === 0) return [];
      const jsons = await redis.hmget(keys.catalog, ...filenames);
      return jsons.map((json) => (json ? (JSON.parse(json) as CatalogEntry) : undefined));
    },
    async snapshot() {
      const [seq, flat] = (await redis.eval(SNAPSHOT_LUA, 2, keys.catalog, keys.catalogSeq)) as [string, string[]];
      const entries: CatalogEntry[] = [];
      for (let i = 1; i < flat.length; i += 2) entries.push(JSON.parse(flat[i] as string) as CatalogEntry);
      entries.sort((a, b) => (a.filename < b.filename ? -1 : 1));
      return { seq: seen(Number(seq)), entries };
    },
    async snapshotJson() {
      const [seq, flat] = (await redis.eval(SNAPSHOT_LUA, 2, keys.catalog, keys.catalogSeq)) as [string, string[]];
      const entries: [string, string][] = [];
      for (let i = 1; i < flat.length; i += 2) entries.push([flat[i - 1] as string, flat[i] as string]);
      entries.sort((a, b) => (a[0] < b[0] ? -1 : 1));
      return { seq: seen(Number(seq)), entries };
    },
    async seq() {
      return seen(Number((await redis.get(keys.catalogSeq)) ?? 0));
    },
  };
}

/** Parse one announcement from the catalog channel; undefined for anything malformed. */
export function parseCatalogChange(message: string): CatalogChange | undefined {
  try {
    const v = JSON.parse(message) as CatalogChange;
    return typeof v.seq === 'number' && v.entry && typeof v.entry.filename === 'string' ? v : undefined;
  } catch {
    return undefined;
  }
}
