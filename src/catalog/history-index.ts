/**
 * Every retained publication of a file (GET /v1/history): a sorted set per filename, scored by
 * published_at ms, written by the catalog's commit script (commit-script.ts) in the same atomic
 * step that publishes, and trimmed there by count and age (always the oldest first). The store
 * holds records of the publications and trims (written after the commit by the worker, in
 * batches: src/ingest/background/history-log.ts), from which the set is rebuilt when Redis lost it.
 *
 * A member is `<publishedMs>:<seq>:<sha256>:<size>:<generatedAtMs>`, every field a listing gives,
 * publishedMs and seq written with 15 digits: members sort as publications do (time, then commit).
 */
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/key-names.js';

export interface HistoryVersion {
  readonly publishedMs: number;
  readonly seq: number;
  readonly sha256: string;
  readonly size: number;
  readonly generatedAtMs: number;
  /** The member as stored (the cursor of a page continues after it). */
  readonly member: string;
}

const MEMBER_RE = /^(\d{15}):(\d{15}):([0-9a-f]{64}):(\d{1,15}):(-?\d{1,16})$/;

export function parseMember(member: string): HistoryVersion | undefined {
  const m = MEMBER_RE.exec(member);
  if (!m) return undefined;
  return { publishedMs: Number(m[1]), seq: Number(m[2]), sha256: m[3]!, size: Number(m[4]), generatedAtMs: Number(m[5]), member };
}

export interface HistoryPage {
  readonly versions: readonly HistoryVersion[];
  /** More, older, versions follow (ask again with `before` = the last one's member). */
  readonly more: boolean;
}

export interface HistoryIndex {
  /** Newest first: up to `limit` publications published before `beforeMs`, or after the cursor `after` (a member). */
  page(filename: string, opts: { beforeMs?: number; after?: string; limit: number }): Promise<HistoryPage>;
  /** The publication current at `ms` (the newest published at or before it). */
  at(filename: string, ms: number): Promise<HistoryVersion | undefined>;
  /** The publication after `v` (the one that replaced it); undefined while `v` is current. */
  next(filename: string, v: HistoryVersion): Promise<HistoryVersion | undefined>;
  /** The latest retained publication whose ETag hex (the sha256's first 32 digits) is `hex`. */
  byEtag(filename: string, hex: string): Promise<HistoryVersion | undefined>;
  /** The published filenames whose history index was never rebuilt from the store (Redis lost it, or it predates history). */
  unbuilt(): Promise<string[]>;
  /**
   * Add the store's records of `filename` (members) newer than its newest trim, and recount; marks
   * the index built. Says how many of them the index lacked (`restored`) and how many versions it
   * holds now.
   */
  rebuild(filename: string, members: readonly string[]): Promise<{ restored: number; versions: number }>;
  /** Whether each (filename, sha256) is used by the current entry, the versions list or a retained publication. */
  inUse(items: readonly { readonly filename: string; readonly sha256: string }[]): Promise<boolean[]>;
}

// KEYS: history set, refs hash. ARGV: members. Adds those newer than the newest trimmed (the
// field t the commit script keeps: trims take the oldest first, so older ones were trimmed, maybe
// by another worker after the records were read); says how many were new.
const ADD_LUA = `
local t = redis.call('HGET', KEYS[2], 't')
local added = 0
for i = 1, #ARGV do
  local m = ARGV[i]
  if not t or m > t then added = added + redis.call('ZADD', KEYS[1], tonumber(string.sub(m, 1, 15)), m) end
end
return added
`;

// KEYS: history set, refs hash. Recounts every sha256 and the latest member of each ETag from the
// whole set (after the store's records were added), and marks the index built.
const RECOUNT_LUA = `
local t = redis.call('HGET', KEYS[2], 't')
redis.call('DEL', KEYS[2])
if t then redis.call('HSET', KEYS[2], 't', t) end
local all = redis.call('ZRANGE', KEYS[1], 0, -1)
for i = 1, #all do
  local sha = string.match(all[i], '^[^:]*:[^:]*:([^:]*):')
  redis.call('HINCRBY', KEYS[2], 'n:' .. sha, 1)
  redis.call('HSET', KEYS[2], 'm:' .. string.sub(sha, 1, 32), all[i])
end
redis.call('HSET', KEYS[2], 'built', '1')
return #all
`;

// KEYS: catalog hash, versions list, refs hash. ARGV: filename, sha256.
const IN_USE_LUA = `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and cjson.decode(cur).sha256 == ARGV[2] then return 1 end
if redis.call('HEXISTS', KEYS[3], 'n:' .. ARGV[2]) == 1 then return 1 end
if redis.call('LPOS', KEYS[2], ARGV[2]) then return 1 end
return 0
`;

export function createHistoryIndex(redis: Redis, keys: RedisKeys): HistoryIndex {
  const parsed = (members: readonly string[]) => members.map(parseMember).filter((v): v is HistoryVersion => v !== undefined);
  return {
    async page(filename, opts) {
      const key = keys.history(filename);
      const want = opts.limit + 1;
      let members: string[];
      if (opts.after !== undefined) {
        // Members sort as they score (time, then seq): those before the cursor are those below it.
        const cursor = opts.after;
        const score = Number(cursor.slice(0, 15));
        const raw = await redis.zrevrangebyscore(key, score, '-inf', 'LIMIT', 0, want + 32);
        members = raw.filter((m) => m < cursor);
        if (members.length < want && raw.length === want + 32) {
          members = raw.filter((m) => m < cursor && Number(m.slice(0, 15)) === score);
          members = members.concat(await redis.zrevrangebyscore(key, `(${score}`, '-inf', 'LIMIT', 0, want));
        }
      } else {
        const max = opts.beforeMs === undefined ? '+inf' : `(${opts.beforeMs}`;
        members = await redis.zrevrangebyscore(key, max, '-inf', 'LIMIT', 0, want);
      }
      return { versions: parsed(members.slice(0, opts.limit)), more: members.length > opts.limit };
    },
    async at(filename, ms) {
      const [m] = await redis.zrevrangebyscore(keys.history(filename), ms, '-inf', 'LIMIT', 0, 1);
      return m === undefined ? undefined : parseMember(m);
    },
    async next(filename, v) {
      const key = keys.history(filename);
      const after = await redis.zrangebyscore(key, v.publishedMs, '+inf', 'LIMIT', 0, 64);
      const m = after.find((x) => x > v.member);
      if (m !== undefined) return parseMember(m);
      if (after.length < 64) return undefined;
      const [later] = await redis.zrangebyscore(key, `(${v.publishedMs}`, '+inf', 'LIMIT', 0, 1);
      return later === undefined ? undefined : parseMember(later);
    },
    async byEtag(filename, hex) {
      const m = await redis.hget(keys.historyRefs(filename), `m:${hex}`);
      return m ? parseMember(m) : undefined;
    },
    async unbuilt() {
      const filenames = await redis.hkeys(keys.catalog);
      if (filenames.length === 0) return [];
      const p = redis.pipeline();
      for (const f of filenames) p.hexists(keys.historyRefs(f), 'built');
      const res = (await p.exec()) ?? [];
      return filenames.filter((_, i) => res[i]?.[1] !== 1);
    },
    async rebuild(filename, members) {
      const valid = members.filter((m) => MEMBER_RE.test(m));
      let restored = 0;
      for (let i = 0; i < valid.length; i += 5000) {
        const chunk = valid.slice(i, i + 5000);
        // How many members were new: those the index had lost.
        restored += Number(await redis.eval(ADD_LUA, 2, keys.history(filename), keys.historyRefs(filename), ...chunk));
      }
      const versions = Number(await redis.eval(RECOUNT_LUA, 2, keys.history(filename), keys.historyRefs(filename)));
      return { restored, versions };
    },
    async inUse(items) {
      if (items.length === 0) return [];
      const p = redis.pipeline();
      for (const it of items) p.eval(IN_USE_LUA, 3, keys.catalog, keys.catalogVersions(it.filename), keys.historyRefs(it.filename), it.filename, it.sha256);
      const res = (await p.exec()) ?? [];
      return items.map((_, i) => {
        const [err, v] = res[i] ?? [new Error('no reply')];
        if (err) throw err;
        return v === 1;
      });
    },
  };
}
