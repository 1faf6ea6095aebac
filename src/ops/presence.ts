/**
 * Which processes of the service run under a Redis and prefix: every process of `oddsfiles start`
 * (any role) writes its name and the time into one sorted set when it starts and every
 * EVERY_MS after, so that a command can tell whether anything serves that prefix lately (`keys
 * create` warns when nothing does: a key made under a prefix no reader uses gets 401 everywhere).
 * Entries are not removed at a stop (a restart still counts as lately); the writers trim the old.
 */
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/key-names.js';

const EVERY_MS = 15_000;
/** How long a process that stopped writing is still listed. */
const KEEP_MS = 60 * 60_000;
/** What "lately" means for `seenLately`: several of the writers' periods. */
export const PRESENCE_WINDOW_MS = 60_000;

// Times are Redis's own (TIME), so that hosts whose clocks differ agree on what "lately" is.
const ANNOUNCE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return now`;
const SEEN = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], now - tonumber(ARGV[1]), '+inf')`;

/** Say that this process runs (now and every EVERY_MS) until the returned stop. Never rejects. */
export function announcePresence(redis: Redis, keys: RedisKeys, roles: readonly string[]): () => void {
  const member = `${roles.join('+')}@${hostname()}:${process.pid}`;
  const write = () => void redis.eval(ANNOUNCE, 1, keys.processes, member, KEEP_MS).catch(() => undefined);
  write();
  const timer = setInterval(write, EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** The processes (`<roles>@<host>:<pid>`) that said they run within the last `withinMs`. */
export async function seenLately(redis: Redis, keys: RedisKeys, withinMs = PRESENCE_WINDOW_MS): Promise<string[]> {
  return (await redis.eval(SEEN, 1, keys.processes, withinMs)) as string[];
}
