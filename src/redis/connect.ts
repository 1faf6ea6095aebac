/**
 * Redis connections, following BullMQ's production guidance: workers and subscribers retry for
 * ever (maxRetriesPerRequest: null) with a capped backoff; command clients that serve requests
 * fail fast while Redis is away instead of queueing commands without bound.
 */
import { Redis, type RedisOptions } from 'ioredis';
import { RedisUnavailableError } from '../errors.js';

export type ConnectionRole = 'worker' | 'client' | 'subscriber';

export function redisOptions(role: ConnectionRole, name: string): RedisOptions {
  return {
    connectionName: name,
    lazyConnect: false,
    enableReadyCheck: true,
    // Reconnect for ever, 50 ms first, at most every 2 s: outages end and we must come back.
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 10), 2000),
    reconnectOnError: (err) => err.message.startsWith('READONLY'),
    maxRetriesPerRequest: role === 'client' ? 1 : null,
    enableOfflineQueue: role !== 'client',
    connectTimeout: 5000,
    keepAlive: 10_000,
  };
}

export function createRedis(url: string, role: ConnectionRole, name: string): Redis {
  return new Redis(url, redisOptions(role, name));
}

/** One PING with a short deadline; true when something answered. */
export async function redisAnswers(url: string, timeoutMs = 1000): Promise<boolean> {
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/** A Redis URL fit for logs: its credentials masked. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, '//***@');
}

/** Where a client connects, as a URL without credentials. */
function describeTarget(redis: Redis): string {
  const o = redis.options;
  if (o.path) return `unix://${o.path}`;
  return `${o.tls ? 'rediss' : 'redis'}://${o.host ?? '127.0.0.1'}:${o.port ?? 6379}${o.db ? `/${o.db}` : ''}`;
}

/**
 * Resolve once the connection is ready (a fail-fast client rejects commands before that). Past the
 * deadline: a RedisUnavailableError naming the server (never its password), the last connection
 * error, and what to check.
 */
export function whenReady(redis: Redis, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    let lastError: string | undefined;
    const onError = (err: Error) => (lastError = err.message);
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      redis.off('error', onError);
      const why = lastError ? ` (${lastError})` : '';
      reject(
        new RedisUnavailableError(
          `cannot reach Redis at ${describeTarget(redis)} within ${timeoutMs / 1000} s${why}: is redis-server running there? Check REDIS_URL, or leave REDIS_URL unset to use the default (or the private redis-server \`oddsfiles start\` runs when nothing answers there)`,
        ),
      );
    }, timeoutMs);
    const onReady = () => {
      clearTimeout(timer);
      redis.off('error', onError);
      resolve();
    };
    redis.once('ready', onReady);
    redis.on('error', onError);
  });
}
