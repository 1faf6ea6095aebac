/**
 * A Lua script run by its SHA-1 (EVALSHA) and sent whole (EVAL) only when Redis has not cached it
 * (after a restart, a failover or SCRIPT FLUSH): a script run with every publication would
 * otherwise be sent, parsed and hashed by Redis each time.
 *
 * The caller awaits ioredis's own promise, and on NOSCRIPT sends EVAL:
 *
 *     try { reply = await redis.evalsha(script.sha1, n, ...args) }
 *     catch (err) { if (!isNoScript(err)) throw err; reply = await redis.eval(script.lua, n, ...args) }
 *
 * so that its code after the reply runs as soon as after any other command's: a wrapper (an async
 * function, or ioredis's defineCommand) would run it a microtask or more later, after the code of
 * replies that came after it, which a caller ordering replies (the catalog's seq) cannot allow.
 */
import { createHash } from 'node:crypto';

export interface LuaScript {
  readonly lua: string;
  readonly sha1: string;
}

export function luaScript(lua: string): LuaScript {
  return { lua, sha1: createHash('sha1').update(lua).digest('hex') };
}

/** Redis does not have the script cached: send it whole. */
export function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}
