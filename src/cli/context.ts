/**
 * What every command gets: its output streams, the configuration (loaded once, on first use) and
 * a Redis connection (resolved once: REDIS_URL, the default, or a running private redis-server).
 * Commands take this context instead of reaching for globals, so tests can run them in-process.
 */
import type { Redis } from 'ioredis';
import { loadConfig, type Config } from '../config.js';
import { createRedis } from '../redis/connect.js';
import { redisKeys, type RedisKeys } from '../redis/keys.js';
import { resolveRedis } from '../redis/private-server.js';

export interface CliIO {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
}

export interface CliContext {
  readonly io: CliIO;
  readonly env: Readonly<Record<string, string | undefined>>;
  config(): Config;
  /** A command connection to Redis (fails fast while Redis is away). */
  redis(): Promise<Redis>;
  keys(): RedisKeys;
  /** Close whatever the command opened. */
  close(): Promise<void>;
}

export function createCliContext(io: CliIO, env: Readonly<Record<string, string | undefined>>, cwd: string): CliContext {
  let config: Config | undefined;
  let redis: Promise<Redis> | undefined;
  const ctx: CliContext = {
    io,
    env,
    config: () => (config ??= loadConfig({ env, cwd })),
    redis: () =>
      (redis ??= (async () => {
        const { url } = await resolveRedis(ctx.config(), { startPrivate: false });
        const client = createRedis(url, 'client', 'oddsfiles-cli');
        client.on('error', () => undefined);
        await client.ping();
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
