/**
 * The catalog restored from the store's manifest.json, for a Redis that came back empty, a new
 * Redis, or one that came back on older data (its seq behind the manifest's). Each file's entry
 * is put back unless the catalog holds a newer one (newest wins, as in the commit), with the same
 * object, sha256 and so the same bytes and ETag; nothing is published again.
 *
 * Positions: when Redis lost commits the manifest covers, positions handed out before may name
 * other changes in a counter that starts again. The change log then starts a new epoch: emptied,
 * with the seq moved past every position handed out before (the manifest's seq, and the clock in
 * ms, which a counter of one per publication does not reach), so readers and clients holding an
 * older position are told to start again (`reset`, 410) instead of resuming from a wrong place.
 * The epoch key marks the catalog restored; a worker's commit waits for it (redis-catalog.ts).
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/key-names.js';
import type { Store } from '../store/store.js';
import { readManifest } from './manifest.js';

export interface RestoreReport {
  /** False when the catalog was restored already (it has its epoch) and no restore was forced. */
  readonly ran: boolean;
  /** The manifest's entries put back (the catalog lacked them or held older ones). */
  readonly files: number;
  /** Entries in the manifest. */
  readonly manifestFiles: number;
  readonly manifestSeq: number;
  /** The catalog's seq afterwards. */
  readonly seq: number;
  /** Redis had lost commits: the change log started a new epoch at `seq`. */
  readonly newEpoch: boolean;
}

// KEYS: catalog hash, seq, epoch, change log. ARGV: force ('1'), epoch id, manifest seq, the seq of
// a new epoch, versions-list key prefix, catalog channel, then filename and entry JSON per file.
const RESTORE_LUA = `
if ARGV[1] ~= '1' and redis.call('EXISTS', KEYS[3]) == 1 then
  return {'ready', redis.call('GET', KEYS[2]) or '0', '0', '0'}
end
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
local lost = seq < tonumber(ARGV[3])
if lost then
  redis.call('SET', KEYS[2], ARGV[4])
  redis.call('DEL', KEYS[4])
end
local at = redis.call('GET', KEYS[2]) or '0'
local files = 0
for i = 7, #ARGV, 2 do
  local f, json = ARGV[i], ARGV[i + 1]
  local n = cjson.decode(json)
  local cur = redis.call('HGET', KEYS[1], f)
  local take = not cur
  if cur then
    local c = cjson.decode(cur)
    local cg, ng = tonumber(c.generatedAtMs), tonumber(n.generatedAtMs)
    take = c.sha256 ~= n.sha256 and (ng > cg or (ng == cg and n.publishedAt > c.publishedAt))
  end
  if take then
    redis.call('HSET', KEYS[1], f, json)
    redis.call('LREM', ARGV[5] .. f, 0, n.sha256)
    redis.call('LPUSH', ARGV[5] .. f, n.sha256)
    redis.call('PUBLISH', ARGV[6], '{"seq":' .. at .. ',"entry":' .. json .. '}')
    files = files + 1
  end
end
redis.call('SETNX', KEYS[3], ARGV[2])
return {'restored', at, tostring(files), lost and '1' or '0'}
`;

/** Restore the catalog from the store's manifest when it has no epoch (or always, with `force`). */
export async function restoreCatalog(redis: Redis, keys: RedisKeys, store: Pick<Store, 'get'>, opts: { force?: boolean } = {}): Promise<RestoreReport> {
  const manifest = await readManifest(store);
  const files = manifest ? Object.entries(manifest.files) : [];
  const manifestSeq = manifest?.seq ?? 0;
  const versionsPrefix = keys.catalogVersions('');
  const [status, seq, restored, lost] = (await redis.eval(
    RESTORE_LUA,
    4,
    keys.catalog,
    keys.catalogSeq,
    keys.catalogEpoch,
    keys.changeLog,
    opts.force ? '1' : '',
    `${new Date().toISOString()}:${randomBytes(4).toString('hex')}`,
    String(manifestSeq),
    String(Math.max(manifestSeq, Date.now())),
    versionsPrefix,
    keys.catalogChannel,
    ...files.flatMap(([f, e]) => [f, JSON.stringify(e)]),
  )) as [string, string, string, string];
  return {
    ran: status === 'restored',
    files: Number(restored),
    manifestFiles: files.length,
    manifestSeq,
    seq: Number(seq),
    newEpoch: lost === '1',
  };
}
