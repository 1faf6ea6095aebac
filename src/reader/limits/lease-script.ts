/**
 * The shared side of the plan counters (lease.ts): one Redis key per counter,
 * `<prefix>:rate:<rateKey>`, a fixed window (the key's TTL). A lease is one atomic script: INCRBY
 * n, PEXPIRE when the key is new (or has somehow lost its TTL), answer the new total and the PTTL.
 * The key holds the same count as @fastify/rate-limit's Redis store used to (INCR by one per
 * request, same name, same TTL), so readers of either kind can share it during an upgrade.
 */
import type { Redis } from 'ioredis';
import type { LeaseFn } from './lease.js';

const COMMAND = 'oddsfilesLeaseTokens';

const LUA = `
local n = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local total = redis.call('INCRBY', KEYS[1], n)
local ttl
if total == n then
  redis.call('PEXPIRE', KEYS[1], window)
  ttl = window
else
  ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then
    redis.call('PEXPIRE', KEYS[1], window)
    ttl = window
  end
end
return {total, ttl}
`;

type WithLease = Redis & {
  [COMMAND]?: (key: string, n: number, windowMs: number) => Promise<[number, number]>;
};

/** The lease function on `redis` for counters named `<nameSpace><key>` (EVALSHA, EVAL on a miss). */
export function redisLease(redis: Redis, nameSpace: string): LeaseFn {
  const r = redis as WithLease;
  if (typeof r[COMMAND] !== 'function') redis.defineCommand(COMMAND, { numberOfKeys: 1, lua: LUA });
  const command = r[COMMAND]!.bind(r);
  return async (key, n, windowMs) => {
    const [total, ttlMs] = await command(nameSpace + key, n, Math.max(1, Math.ceil(windowMs)));
    return { total: Number(total), ttlMs: Number(ttlMs) };
  };
}
