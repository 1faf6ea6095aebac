/**
 * The published index in Redis. The newest-wins rule is enforced here, in one Lua script, so it
 * holds whatever the number of workers and whatever the order their jobs finish in.
 */
import type { Redis } from 'ioredis';
import { OddsfilesError } from '../errors.js';
import type { RedisKeys } from '../redis/key-names.js';
import { encodeCarried } from './carried.js';
import { changeEntryOf } from './change-log.js';
import { createHistoryIndex, type HistoryIndex } from './history-index.js';
import type { CatalogChange, CatalogEntry, CatalogSnapshot, CommitOutcome, CommitResult } from './types.js';

// KEYS: catalog hash, seq counter, versions list, change log (stream). ARGV: filename, entry JSON,
// generatedAtMs, sha256, keepVersions, channel, publishedAtMs, log max entries (0: untrimmed), log
// cutoff ms (0: none), the change's JSON for the log (the entry's fields a consumer sees), the
// SHA-256 of the bytes as received when generated_at was stamped ('' otherwise: see
// src/ingest/publish/decide.ts, the same rule). Equal generated_at with new bytes publishes (a correction). Every published
// change is appended to the log under the id <seq>-0, with the sha256 it replaced; the log is
// trimmed by length, and by age a bounded number of entries per commit.
// History (KEYS 5, 6; ARGV: size, history max versions, history cutoff ms): every publication is
// added to the filename's history (history-index.ts), scored by its published_at (never below the
// newest already there, so the order of scores is the order of commits); the oldest are trimmed
// by count and age, a bounded number per commit, never the one just added. A sha256 is returned
// as evicted (its object may be deleted) only when no retained publication, the versions list nor
// the current entry uses it; the trimmed members are returned too (their store records go), and
// the newest one trimmed is kept (field t of the refs hash): a rebuild never adds it or older back.
// KEYS 7, ARGV 15: the epoch key, and '1' when a catalog without it takes no commit ('unready':
// it must be restored from the store first, restore.ts).
const COMMIT_LUA = `
if ARGV[15] == '1' and redis.call('EXISTS', KEYS[7]) == 0 then return {'unready'} end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local prev = ''
if cur then
  local c = cjson.decode(cur)
  if c.sha256 == ARGV[4] or (ARGV[11] ~= '' and c.sourceSha256 == ARGV[11]) then
    return {'unchanged', cur, redis.call('GET', KEYS[2]) or '0'}
  end
  if tonumber(c.generatedAtMs) > tonumber(ARGV[3]) then
    return {'superseded', cur, redis.call('GET', KEYS[2]) or '0'}
  end
  prev = c.sha256
end
local seq = redis.call('INCR', KEYS[2])
local id = seq .. '-0'
if not pcall(redis.call, 'XADD', KEYS[4], id, 'e', ARGV[10], 'p', prev, 't', ARGV[7]) then
  -- The counter went back (Redis lost it, the log survived): the log starts again from here.
  redis.call('DEL', KEYS[4])
  redis.call('XADD', KEYS[4], id, 'e', ARGV[10], 'p', prev, 't', ARGV[7])
end
if tonumber(ARGV[8]) > 0 then redis.call('XTRIM', KEYS[4], 'MAXLEN', '~', ARGV[8]) end
local cutoff = tonumber(ARGV[9])
if cutoff > 0 then
  -- A few of the oldest per commit: enough to keep up, as each commit adds one.
  local old = redis.call('XRANGE', KEYS[4], '-', '+', 'COUNT', 4)
  local upto = nil
  for i = 1, #old do
    local f = old[i][2]
    if tonumber(f[6]) < cutoff and old[i][1] ~= id then upto = old[i][1] else break end
  end
  if upto then
    local n = tonumber(string.match(upto, '^(%d+)'))
    redis.call('XTRIM', KEYS[4], 'MINID', (n + 1) .. '-0')
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('LREM', KEYS[3], 0, ARGV[4])
redis.call('LPUSH', KEYS[3], ARGV[4])
local keep = tonumber(ARGV[5])
local candidates = redis.call('LRANGE', KEYS[3], keep, -1)
redis.call('LTRIM', KEYS[3], 0, keep - 1)
local score = tonumber(ARGV[7])
local top = redis.call('ZREVRANGE', KEYS[5], 0, 0, 'WITHSCORES')
if top[2] and tonumber(top[2]) > score then score = tonumber(top[2]) end
local hm = string.format('%015d', score) .. ':' .. string.format('%015d', seq) .. ':' .. ARGV[4] .. ':' .. ARGV[12] .. ':' .. ARGV[3]
redis.call('ZADD', KEYS[5], score, hm)
redis.call('HINCRBY', KEYS[6], 'n:' .. ARGV[4], 1)
redis.call('HSET', KEYS[6], 'm:' .. string.sub(ARGV[4], 1, 32), hm)
local removed = {}
local over = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[13])
if over > 0 then removed = redis.call('ZRANGE', KEYS[5], 0, math.min(over, 16) - 1) end
local hcut = tonumber(ARGV[14])
if #removed < 16 and hcut > 0 then
  local old = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. ARGV[14], 'LIMIT', #removed, 16 - #removed)
  for i = 1, #old do removed[#removed + 1] = old[i] end
end
local trimmed = {}
for i = 1, #removed do
  local m = removed[i]
  if m ~= hm then
    redis.call('ZREM', KEYS[5], m)
    trimmed[#trimmed + 1] = m
    local t = redis.call('HGET', KEYS[6], 't')
    if not t or m > t then redis.call('HSET', KEYS[6], 't', m) end
    local sha = string.match(m, '^[^:]*:[^:]*:([^:]*):')
    if redis.call('HINCRBY', KEYS[6], 'n:' .. sha, -1) <= 0 then
      redis.call('HDEL', KEYS[6], 'n:' .. sha, 'm:' .. string.sub(sha, 1, 32))
      candidates[#candidates + 1] = sha
    end
  end
end
local evicted = {}
local seen = {}
for i = 1, #candidates do
  local sha = candidates[i]
  if not seen[sha] and sha ~= ARGV[4] and redis.call('HEXISTS', KEYS[6], 'n:' .. sha) == 0 and not redis.call('LPOS', KEYS[3], sha) then
    evicted[#evicted + 1] = sha
  end
  seen[sha] = true
end
redis.call('PUBLISH', ARGV[6], '{"seq":' .. seq .. ',"entry":' .. ARGV[2] .. '}')
local out = {'published', ARGV[2], tostring(seq), hm, tostring(#evicted)}
for i = 1, #evicted do out[#out + 1] = evicted[i] end
for i = 1, #trimmed do out[#out + 1] = trimmed[i] end
return out
`;

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
      const reply = (await redis.eval(
        COMMIT_LUA,
        7,
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
      )) as string[];
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
