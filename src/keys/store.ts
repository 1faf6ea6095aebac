/**
 * The key store in Redis. Two hashes: `apiKeys` (id → record JSON) and `apiKeyHashes`
 * (sha256 hex of a key → id). The key itself is never stored: it is returned once, by create().
 * Every change is published on `apiKeysChannel` so that readers apply it at once.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Plan } from '../config.js';
import { NotFoundError, OddsfilesError, UsageError } from '../errors.js';
import type { RedisKeys } from '../redis/key-names.js';
import { patternProblem } from './patterns.js';
import { generateApiKey, hashApiKey } from './secret.js';
import type { KeyChange, KeyRecord } from './types.js';

export interface CreateKeyInput {
  readonly name: string;
  readonly plan?: string | undefined;
  readonly allow?: readonly string[] | undefined;
  /** Filename patterns the key may publish (same syntax as allow). */
  readonly publish?: readonly string[] | undefined;
}

export interface CreatedKey {
  /** The plain key: shown once, never stored. */
  readonly key: string;
  readonly record: KeyRecord;
}

export interface RevokeResult {
  readonly record: KeyRecord;
  /** The key had been revoked before this call (nothing changed). */
  readonly alreadyRevoked: boolean;
}

/** Everything a reader needs to authenticate: records by id and key hashes (hex) → id. */
export interface KeySet {
  readonly records: ReadonlyMap<string, KeyRecord>;
  readonly hashes: ReadonlyMap<string, string>;
}

export interface KeyStore {
  create(input: CreateKeyInput): Promise<CreatedKey>;
  /** Every key record, oldest first. Never the keys. */
  list(): Promise<KeyRecord[]>;
  /** Revoke by id, or by the name of a key that is not revoked. NotFoundError when none matches. */
  revoke(idOrName: string): Promise<RevokeResult>;
  /** The record of a key that is valid now (not revoked), looked up by its SHA-256. */
  verify(key: string): Promise<KeyRecord | undefined>;
  loadAll(): Promise<KeySet>;
}

/** A second key with the same name while the first is not revoked. */
export class KeyNameTakenError extends OddsfilesError {
  constructor(name: string, id: string) {
    super('keys.name_taken', `a key named ${JSON.stringify(name)} exists (${id}); revoke it first or pick another name`);
  }
}

const ID_RE = /^key_[0-9a-f]{12}$/;

// KEYS: records, hashes. ARGV: id, name, record JSON, hash, channel, message.
// Names are unique among keys that are not revoked; checked and written in one step.
const CREATE_LUA = `
local vals = redis.call('HVALS', KEYS[1])
for i = 1, #vals do
  local r = cjson.decode(vals[i])
  if r.name == ARGV[2] and type(r.revoked_at) ~= 'string' then return {'name_taken', r.id} end
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 or redis.call('HEXISTS', KEYS[2], ARGV[4]) == 1 then
  return {'collision', ''}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[4], ARGV[1])
redis.call('PUBLISH', ARGV[5], ARGV[6])
return {'ok', ARGV[1]}
`;

// KEYS: records. ARGV: id, expected JSON, new JSON, channel, message. Compare and set.
const REVOKE_LUA = `
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 'retry' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 'ok'
`;

export interface KeyStoreDeps {
  readonly redis: Redis;
  readonly keys: RedisKeys;
  readonly plans: Readonly<Record<string, Plan>>;
  readonly now?: () => Date;
}

export function createKeyStore(deps: KeyStoreDeps): KeyStore {
  const { redis, keys, plans } = deps;
  const now = deps.now ?? (() => new Date());

  const readAll = async (): Promise<Map<string, { json: string; record: KeyRecord }>> => {
    const flat = await redis.hgetall(keys.apiKeys);
    const out = new Map<string, { json: string; record: KeyRecord }>();
    for (const [id, json] of Object.entries(flat)) {
      const record = parseRecord(json);
      if (record && record.id === id) out.set(id, { json, record });
    }
    return out;
  };

  return {
    async create(input) {
      const name = checkName(input.name);
      const plan = input.plan === undefined || input.plan === '' ? null : input.plan;
      if (plan !== null && !plans[plan]) {
        throw new UsageError(`unknown plan ${JSON.stringify(plan)}; plans: ${Object.keys(plans).sort().join(', ') || '(none)'}`);
      }
      const allow = [...new Set(input.allow ?? [])];
      const publish = [...new Set(input.publish ?? [])];
      for (const p of [...allow, ...publish]) {
        const problem = patternProblem(p);
        if (problem) throw new UsageError(problem);
      }
      for (let attempt = 0; attempt < 5; attempt++) {
        const key = generateApiKey();
        const record: KeyRecord = {
          id: `key_${randomBytes(6).toString('hex')}`,
          name,
          plan,
          allow,
          publish,
          created_at: now().toISOString(),
          revoked_at: null,
        };
        const change: KeyChange = { op: 'create', id: record.id };
        const [status, other] = (await redis.eval(
          CREATE_LUA,
          2,
          keys.apiKeys,
          keys.apiKeyHashes,
          record.id,
          name,
          JSON.stringify(record),
          hashApiKey(key).toString('hex'),
          keys.apiKeysChannel,
          JSON.stringify(change),
        )) as [string, string];
        if (status === 'ok') return { key, record };
        if (status === 'name_taken') throw new KeyNameTakenError(name, other);
      }
      throw new OddsfilesError('keys.collision', 'could not pick an unused key id');
    },

    async list() {
      const all = [...(await readAll()).values()].map((v) => v.record);
      return all.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
    },

    async revoke(idOrName) {
      for (let attempt = 0; attempt < 10; attempt++) {
        const all = await readAll();
        const found = findKey(all, idOrName);
        if (!found) throw new NotFoundError(`no key with id or name ${JSON.stringify(idOrName)}`);
        if (found.record.revoked_at !== null) return { record: found.record, alreadyRevoked: true };
        const record: KeyRecord = { ...found.record, revoked_at: now().toISOString() };
        const change: KeyChange = { op: 'revoke', id: record.id, revoked_at: record.revoked_at as string };
        const status = await redis.eval(
          REVOKE_LUA,
          1,
          keys.apiKeys,
          record.id,
          found.json,
          JSON.stringify(record),
          keys.apiKeysChannel,
          JSON.stringify(change),
        );
        if (status === 'ok') return { record, alreadyRevoked: false };
      }
      throw new OddsfilesError('keys.busy', 'the key changed while revoking it; try again');
    },

    async verify(key) {
      // Looked up by the key's SHA-256 (see ring.ts: a hit is a match).
      const id = await redis.hget(keys.apiKeyHashes, hashApiKey(key).toString('hex'));
      if (id === null) return undefined;
      const json = await redis.hget(keys.apiKeys, id);
      const record = json === null ? undefined : parseRecord(json);
      return record && record.revoked_at === null ? record : undefined;
    },

    async loadAll() {
      const [records, hashes] = await Promise.all([readAll(), redis.hgetall(keys.apiKeyHashes)]);
      return {
        records: new Map([...records].map(([id, v]) => [id, v.record])),
        hashes: new Map(Object.entries(hashes)),
      };
    },
  };
}

function checkName(raw: string): string {
  const name = raw.trim();
  if (name === '' || name.length > 100 || /[\u0000-\u001f\u007f]/.test(name)) {
    throw new UsageError('a key name must be 1 to 100 printable characters');
  }
  if (ID_RE.test(name)) throw new UsageError(`a key name must not look like a key id (${name})`);
  return name;
}

/** By id first; by name, the key that is not revoked, else the latest revoked one. */
function findKey(all: Map<string, { json: string; record: KeyRecord }>, idOrName: string): { json: string; record: KeyRecord } | undefined {
  const byId = all.get(idOrName);
  if (byId) return byId;
  const named = [...all.values()].filter((v) => v.record.name === idOrName);
  return named.find((v) => v.record.revoked_at === null) ?? named.sort((a, b) => (b.record.revoked_at ?? '').localeCompare(a.record.revoked_at ?? ''))[0];
}

function parseRecord(json: string): KeyRecord | undefined {
  try {
    const r = JSON.parse(json) as Partial<KeyRecord>;
    if (typeof r.id !== 'string' || typeof r.name !== 'string' || typeof r.created_at !== 'string') return undefined;
    return {
      id: r.id,
      name: r.name,
      plan: typeof r.plan === 'string' ? r.plan : null,
      allow: Array.isArray(r.allow) ? r.allow.filter((p): p is string => typeof p === 'string') : [],
      publish: Array.isArray(r.publish) ? r.publish.filter((p): p is string => typeof p === 'string') : [],
      created_at: r.created_at,
      revoked_at: typeof r.revoked_at === 'string' ? r.revoked_at : null,
    };
  } catch {
    return undefined;
  }
}
