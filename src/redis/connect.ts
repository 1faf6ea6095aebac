/**
 * Redis connections, following BullMQ's production guidance: workers and subscribers retry for
 * ever (maxRetriesPerRequest: null) with a capped backoff; command clients that serve requests
 * fail fast while Redis is away instead of queueing commands without bound.
 *
 * A URL is either one server (`redis://`, `rediss://`) or a Sentinel group
 * (`redis+sentinel://[user:pass@]host:port[,host:port…]/<master-name>[?db=N]`): every connection
 * then asks the sentinels for the primary, and follows a failover (a `READONLY` answer or the
 * sentinels' switch announcement makes it reconnect to the new primary). Blocking reads carry a
 * client-side deadline, so none hangs on a connection to a primary that died without closing it.
 */
import { Redis, type RedisOptions } from 'ioredis';
import { RedisUnavailableError } from '../errors.js';
import { sentinelOptions } from './sentinel-url.js';

/** Past its own BLOCK time (or this long for one without), a blocking read resolves empty on the client. */
const BLOCKING_DEADLINE_MS = 30_000;

/** A client for `url` (one server or a Sentinel group) with `options`. */
function clientFor(url: string, options: RedisOptions): Redis {
  const sentinel = sentinelOptions(url);
  return sentinel ? new Redis({ ...sentinel, ...options }) : new Redis(url, options);
}

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
    blockingTimeout: BLOCKING_DEADLINE_MS,
  };
}

export function createRedis(url: string, role: ConnectionRole, name: string): Redis {
  return clientFor(url, redisOptions(role, name));
}

/** The server a connection is talking to now (`host:port`): the primary in use behind Sentinel. */
export function connectedServer(redis: Redis): string | undefined {
  const s = redis.stream as { remoteAddress?: string; remotePort?: number } | undefined;
  return s?.remoteAddress && s.remotePort ? `${s.remoteAddress.includes(':') ? `[${s.remoteAddress}]` : s.remoteAddress}:${s.remotePort}` : undefined;
}

/** One PING with a short deadline; true when something answered. */
export async function redisAnswers(url: string, timeoutMs = 1000): Promise<boolean> {
  const client = clientFor(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    sentinelRetryStrategy: () => null,
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
  if (o.sentinels) return `the primary "${o.name ?? ''}" of the sentinels ${o.sentinels.map((x) => `${x.host ?? '127.0.0.1'}:${x.port ?? 26379}`).join(',')}`;
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
      // Connected but never ready: something listens there and does not answer.
      const message =
        redis.status === 'connect' && !lastError
          ? `Redis at ${describeTarget(redis)} took the connection but did not answer within ${timeoutMs / 1000} s: is it paused, overloaded or not a Redis server? Check REDIS_URL`
          : `cannot reach Redis at ${describeTarget(redis)} within ${timeoutMs / 1000} s${why}: is redis-server running there? Check REDIS_URL, or leave REDIS_URL unset to use the default (or the private redis-server \`oddsfiles start\` runs when nothing answers there)`;
      reject(new RedisUnavailableError(message));
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
