/**
 * Redis connections, following BullMQ's production guidance: workers and subscribers retry for
 * ever (maxRetriesPerRequest: null) with a capped backoff; command clients that serve requests
 * fail fast while Redis is away instead of queueing commands without bound.
 */
import { Redis, type RedisOptions } from 'ioredis';

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

/** Resolve once the connection is ready (a fail-fast client rejects commands before that). */
export function whenReady(redis: Redis, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      reject(new Error(`Redis did not become ready within ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    redis.once('ready', onReady);
  });
}
