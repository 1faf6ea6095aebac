/**
 * The reads a request makes of Redis, beyond what the reader holds in memory: the change log's
 * older past and its bounds (GET /v1/changes and /v1/stream from a position other than the head),
 * a file's history (GET /v1/history). Bounded: with Redis away such a request answers 503 +
 * Retry-After, never 500 and never after the whole outage. Redis stopped, the command connection
 * (no offline queue) fails the read at once: 503 at once. Redis paused (connected, silent): 503
 * after REDIS_READ_BOUND_MS; the command stays on the connection and its late answer is dropped.
 *
 * Reads only, bounded per call here: the command connection itself has no timeout, as the worker's
 * catalog commits share it in a one-process service, and a commit cut short must not be resent.
 */
import type { ChangeLog } from '../catalog/change-log.js';
import type { HistoryIndex } from '../catalog/history-index.js';
import { HttpProblem } from '../errors.js';
import { isRedisConnectionError } from '../redis/outage-log.js';
import { TimeoutError, withTimeout } from '../timeout.js';

/** How long a request waits for a Redis read before answering 503 (docs/errors.md). */
export const REDIS_READ_BOUND_MS = 3000;
/** The Retry-After of that 503, in seconds: a Redis restart or failover takes a few. */
const RETRY_AFTER_S = '5';

/** Replies of a Redis that is there but cannot serve yet: loading its data, or no primary (a failover). */
const NOT_SERVING_REPLY = /^(LOADING|MASTERDOWN|READONLY|TRYAGAIN)\b/;

/** A failure that means Redis is away (then a 503), rather than a bug or a wrong answer (then a 500, logged). */
function redisAway(err: unknown): boolean {
  return err instanceof TimeoutError || isRedisConnectionError(err) || (err instanceof Error && NOT_SERVING_REPLY.test(err.message));
}

/**
 * `read`, or a 503 HttpProblem when Redis is away: the read has no answer within `ms`, or fails
 * for want of a connection. Other failures pass as they are. `what` names the data for the client.
 */
export async function boundedRead<T>(read: Promise<T>, what: string, ms = REDIS_READ_BOUND_MS): Promise<T> {
  try {
    return await withTimeout(read, ms, what);
  } catch (err) {
    if (!redisAway(err)) throw err;
    const why = err instanceof TimeoutError ? `did not answer within ${ms / 1000} s` : 'cannot be reached';
    throw new HttpProblem('unavailable', `Redis, which keeps ${what}, ${why}; files and their data are still served. Retry after Retry-After seconds.`, {
      'retry-after': RETRY_AFTER_S,
    });
  }
}

/** The change log's range and bounds reads bounded; `read` (the tail's XREAD BLOCK) as it is. */
export function boundedChangeLog(log: ChangeLog, ms = REDIS_READ_BOUND_MS): ChangeLog {
  const what = 'the change log';
  return {
    range: (after, count) => boundedRead(log.range(after, count), what, ms),
    bounds: () => boundedRead(log.bounds(), what, ms),
    read: (after, count, blockMs) => log.read(after, count, blockMs),
  };
}

/** The history index's reads of GET /v1/history bounded; the rest (the worker's) as they are. */
export function boundedHistoryIndex(index: HistoryIndex, ms = REDIS_READ_BOUND_MS): HistoryIndex {
  const what = 'the history of the files';
  return {
    ...index,
    page: (filename, opts) => boundedRead(index.page(filename, opts), what, ms),
    at: (filename, at) => boundedRead(index.at(filename, at), what, ms),
    next: (filename, v) => boundedRead(index.next(filename, v), what, ms),
    byEtag: (filename, hex) => boundedRead(index.byEtag(filename, hex), what, ms),
  };
}
