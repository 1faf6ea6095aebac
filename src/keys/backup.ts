/**
 * The key records kept in the store as well as in Redis, so that a Redis that lost its data costs
 * no customer their access: `keys/records.json` holds every record (id, name, plan, allow-lists,
 * revocation) with the SHA-256 of its key, never a key. Workers write it from Redis whenever it
 * differs from what they last wrote (sync, every few seconds); a restore puts back into Redis what
 * Redis lacks, and a revocation the store knows of and Redis does not (a revocation is final).
 */
import type { Redis } from 'ioredis';
import { StoreNotFoundError } from '../errors.js';
import type { RedisKeys } from '../redis/key-names.js';
import type { Store } from '../store/store.js';
import type { KeyChange } from './types.js';

export const KEY_RECORDS_KEY = 'keys/records.json';

interface StoredKeys {
  readonly format: 1;
  /** [id, record JSON as Redis holds it, sha256 hex of the key], sorted by id. */
  readonly keys: readonly (readonly [string, string, string])[];
}

export interface KeyBackup {
  /** Write the records to the store if they changed since this process last wrote them; true when written. */
  sync(): Promise<boolean>;
  /** Put the store's records Redis lacks back into Redis; how many were restored. */
  restore(): Promise<number>;
}

export interface KeyBackupDeps {
  readonly redis: Redis;
  readonly keys: RedisKeys;
  readonly store: Pick<Store, 'get' | 'put'>;
}

// KEYS: records, hashes. ARGV: channel, message, then id, record JSON, hash per key. A record Redis
// lacks is added with its hash; one the store has revoked is revoked in Redis too. Readers reload
// on the message.
const RESTORE_LUA = `
local n = 0
for i = 3, #ARGV, 3 do
  local id, json, hash = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local cur = redis.call('HGET', KEYS[1], id)
  local take = not cur
  if cur and type(cjson.decode(json).revoked_at) == 'string' and type(cjson.decode(cur).revoked_at) ~= 'string' then take = true end
  if take then
    redis.call('HSET', KEYS[1], id, json)
    if not cur then redis.call('HSET', KEYS[2], hash, id) end
    n = n + 1
  end
end
if n > 0 then redis.call('PUBLISH', ARGV[1], ARGV[2]) end
return n
`;

export function createKeyBackup(deps: KeyBackupDeps): KeyBackup {
  const { redis, keys, store } = deps;
  let lastWritten: string | undefined;

  const readStored = async (): Promise<string | undefined> => {
    try {
      return (await store.get(KEY_RECORDS_KEY)).toString('utf8');
    } catch (err) {
      if (err instanceof StoreNotFoundError) return undefined;
      throw err;
    }
  };

  return {
    async sync() {
      const [records, hashes] = await Promise.all([redis.hgetall(keys.apiKeys), redis.hgetall(keys.apiKeyHashes)]);
      const hashOf = new Map<string, string>();
      for (const [hash, id] of Object.entries(hashes)) hashOf.set(id, hash);
      const rows = Object.entries(records)
        .filter(([id]) => hashOf.has(id))
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([id, json]) => [id, json, hashOf.get(id)!] as const);
      // Nothing in Redis: a Redis that lost its data must not empty the store's copy.
      if (rows.length === 0) return false;
      const body = JSON.stringify({ format: 1, keys: rows } satisfies StoredKeys);
      lastWritten ??= await readStored();
      if (body === lastWritten) return false;
      await store.put(KEY_RECORDS_KEY, Buffer.from(body), 'application/json');
      lastWritten = body;
      return true;
    },
    async restore() {
      const text = await readStored();
      if (text === undefined) return 0;
      const stored = JSON.parse(text) as StoredKeys;
      if (stored.format !== 1 || stored.keys.length === 0) return 0;
      const change: KeyChange = { op: 'create', id: stored.keys[0]![0] };
      return Number(await redis.eval(RESTORE_LUA, 2, keys.apiKeys, keys.apiKeyHashes, keys.apiKeysChannel, JSON.stringify(change), ...stored.keys.flat()));
    },
  };
}
