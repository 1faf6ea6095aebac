/**
 * Logs the 'error' events of BullMQ objects (Worker, Queue, QueueEvents) without flooding the log
 * while Redis is away. BullMQ forwards every failed reconnection of each of its connections as an
 * 'error' event (ECONNREFUSED every 2 s per connection, for as long as the outage lasts): those
 * connection errors give one `Redis connection lost` line at warn when an outage starts, debug
 * lines while it lasts, and one `Redis connection back` line at info when the connection is ready
 * again. Any other error is a real one and stays at error, with its message, code and stack.
 *
 * An outage follows the ioredis connection handed to BullMQ: it starts with a connection error
 * while that connection is not ready, and ends at its next 'ready'. A connection error while it is
 * ready (a duplicate connection of BullMQ's, such as the worker's blocking one, reconnecting a
 * moment later) is logged at debug and starts nothing.
 */
import type { Logger } from '../log.js';

/** Error codes of a connection that failed or broke (Node's socket errors, DNS while it is down). */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EHOSTDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** Messages of ioredis and BullMQ for the same: a closed connection, retries given up, no offline queue. */
const CONNECTION_MESSAGES = [/^Connection is closed\b/, /Reached the max retries per request limit/, /\bECONNREFUSED\b/, /^Stream isn't writeable/];

/**
 * Redis cannot be reached (as opposed to Redis answering with an error: OOM, READONLY, a script
 * error...). Looks through `cause` too, so a wrapped connection error counts.
 */
export function isRedisConnectionError(err: unknown): boolean {
  for (let e = err, depth = 0; e && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, name, message } = e as { code?: unknown; name?: unknown; message?: unknown };
    if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true;
    if (name === 'MaxRetriesPerRequestError' || name === 'ConnectionClosedError') return true;
    if (typeof message === 'string' && CONNECTION_MESSAGES.some((re) => re.test(message))) return true;
  }
  return false;
}

/** What an error looks like in a log line: an Error as is (pino keeps type, message, code, stack). */
export function loggableError(err: unknown): Error {
  if (err instanceof Error) return err;
  const message =
    typeof err === 'object' && err && typeof (err as { message?: unknown }).message === 'string' ? (err as { message: string }).message : String(err);
  return Object.assign(new Error(message), typeof err === 'object' && err ? { code: (err as { code?: unknown }).code } : {});
}

/** The ioredis connection an outage follows (only what is used here). */
export interface WatchedConnection {
  readonly status: string;
  on(event: 'ready', listener: () => void): unknown;
  off(event: 'ready', listener: () => void): unknown;
}

/** Anything with BullMQ's 'error' event. */
export interface ErrorSource {
  on(event: 'error', listener: (err: Error) => void): unknown;
}

export interface RedisOutageLogOptions {
  readonly log: Logger;
  /** Names the connection in the lines (`worker`, `queue`...). */
  readonly connection: string;
  /** The ioredis connection handed to BullMQ: its status and 'ready' say when an outage ends. */
  readonly redis: WatchedConnection;
  /** The message of a line for any other error (at error), e.g. `worker error`. */
  readonly errorMsg: string;
  readonly now?: () => number;
}

export interface RedisOutageLog {
  /** Handle one 'error' event. */
  onError(err: unknown): void;
  /** Route the 'error' events of a BullMQ object here. */
  watch(source: ErrorSource): void;
  readonly down: boolean;
  /** Stop following the connection (its 'ready' listener). */
  close(): void;
}

export function createRedisOutageLog(opts: RedisOutageLogOptions): RedisOutageLog {
  const now = opts.now ?? Date.now;
  const log = opts.log;
  const connection = opts.connection;
  let since: number | undefined;
  let errors = 0;

  const onReady = () => {
    if (since === undefined) return;
    log.info({ connection, downMs: now() - since, errors }, 'Redis connection back');
    since = undefined;
    errors = 0;
  };
  opts.redis.on('ready', onReady);

  const onError = (raw: unknown) => {
    const err = loggableError(raw);
    if (!isRedisConnectionError(err)) {
      log.error({ err, connection }, opts.errorMsg);
      return;
    }
    if (since === undefined && opts.redis.status !== 'ready') {
      since = now();
      errors = 1;
      log.warn({ err, connection }, 'Redis connection lost; retrying (each further attempt at debug)');
      return;
    }
    if (since !== undefined) errors++;
    log.debug({ err, connection }, 'redis connection error');
  };

  return {
    onError,
    watch(source) {
      source.on('error', onError);
    },
    get down() {
      return since !== undefined;
    },
    close() {
      opts.redis.off('ready', onReady);
    },
  };
}
