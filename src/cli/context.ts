/**
 * What every command gets: its output streams, the configuration (loaded once, on first use) and
 * a Redis connection (resolved once: REDIS_URL, the default, or a running private redis-server).
 * Commands take this context instead of reaching for globals, so tests can run them in-process.
 */
import type { Redis } from 'ioredis';
import { loadConfig, type Config } from '../config.js';
import { createRedis, whenReady } from '../redis/connect.js';
import { redisKeys, type RedisKeys } from '../redis/key-names.js';
import { resolveRedis } from '../redis/private-server.js';

export interface CliIO {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
}

export interface CliContext {
  readonly io: CliIO;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The folder the command was run in (relative paths are resolved against it). */
  readonly cwd: string;
  /**
   * The configuration. A marketplace secret whose environment variable is not set is left out
   * (config.ts, optionalSecrets): only a reader needs it, and `start` checks for it then.
   */
  config(): Config;
  /** A command connection to Redis (fails fast while Redis is away). */
  redis(): Promise<Redis>;
  /** The Redis URL in use (REDIS_URL, the default, or a running private redis-server). */
  redisUrl(): Promise<string>;
  keys(): RedisKeys;
  /** Close whatever the command opened. */
  close(): Promise<void>;
}

export function createCliContext(io: CliIO, env: Readonly<Record<string, string | undefined>>, cwd: string): CliContext {
  let config: Config | undefined;
  let redis: Promise<Redis> | undefined;
  let url: Promise<string> | undefined;
  const ctx: CliContext = {
    io,
    env,
    cwd,
    config: () => (config ??= loadConfig({ env, cwd, optionalSecrets: true })),
    redisUrl: () => (url ??= resolveRedis(ctx.config(), { startPrivate: false }).then((r) => r.url)),
    redis: () =>
      (redis ??= (async () => {
        const client = createRedis(await ctx.redisUrl(), 'client', 'oddsfiles-cli');
        client.on('error', () => undefined);
        await whenReady(client, 5000);
        return client;
      })()),
    keys: () => redisKeys(ctx.config().redis.prefix),
    async close() {
      if (redis) {
        const client = await redis.catch(() => undefined);
        await client?.quit().catch(() => client.disconnect());
      }
    },
  };
  return ctx;
}
