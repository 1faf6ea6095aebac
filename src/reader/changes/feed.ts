/**
 * The change feed of one reader process: the change log (a Redis stream) read as it grows, on a
 * connection of its own (XREAD BLOCK), kept in memory for the recent past, and handed to every
 * listener (open streams, waiting long-polls) in order, each change once.
 *
 * A change is handed on once this reader holds its version (or a newer one), so a client that
 * GETs the file on hearing of it gets that version; a version that does not arrive within
 * `holdTimeoutMs` is announced anyway, in order. Redis away: the feed waits and reads on from
 * its position when Redis is back, so no change is skipped. The log moved out of reach (trimmed
 * past this reader's position during a long outage, or restarted by a Redis that lost its data):
 * listeners are told to start again (`onReset`), never handed a position they cannot resume from.
 */
import type { ChangeLog, LogBounds, LoggedChange } from '../../catalog/change-log.js';
import type { Logger } from '../../log.js';
import type { PublishedCache } from '../data/cache.js';
import { boundedChangeLog } from '../redis-reads.js';
import { toFeedEvent, type FeedEvent } from './event.js';
import { createHold } from './hold.js';
import { createRecentChanges, sinceInLog, type SinceResult } from './recent.js';
import { startTail } from './tail.js';

export type { SinceResult } from './recent.js';

export interface ChangeFeedDeps {
  /** Reads with XREAD BLOCK: a connection of its own. */
  readonly tail: ChangeLog;
  /** Range and bounds reads: the command connection (bounded for requests: redis-reads.ts). */
  readonly log: ChangeLog;
  readonly published: PublishedCache;
  readonly logger: Logger;
  /** How many recent changes are kept in memory (older ones are read from Redis). */
  readonly recent?: number;
  readonly holdTimeoutMs?: number;
  readonly blockMs?: number;
}

export type FeedListener = (event: FeedEvent) => void;

export interface ChangeFeed {
  /** The last position handed to listeners. */
  readonly position: number;
  /** Resolves once the feed knows its starting position. */
  readonly ready: Promise<void>;
  /** True once it does (until then, positions cannot be checked). */
  readonly started: boolean;
  /** Read from Redis: rejects with a 503 HttpProblem within a bound while Redis is away (redis-reads.ts). */
  bounds(): Promise<LogBounds>;
  /**
   * Changes after `after` (up to the feed's position) that `allows` lets through, oldest first: at
   * most `limit` of them, looking at most at `scan` changes. From memory when recent enough; older
   * ones from Redis, as bounds() (a 503 HttpProblem within a bound while Redis is away).
   */
  since(after: number, allows: (filename: string) => boolean, limit: number, scan?: number): Promise<SinceResult>;
  /** True when every change after `after`, up to the feed's position, is held in memory: since() reads no Redis for it. */
  remembers(after: number): boolean;
  subscribe(listener: FeedListener): () => void;
  /** Told when the log moved out of reach: every position before `position` is gone. */
  onReset(listener: (position: number) => void): () => void;
  /** Listeners now (streams and long-polls). */
  readonly listeners: number;
  close(): Promise<void>;
}

const DEFAULT_SCAN = 10_000;

/** The feed: the tail reads the log, the hold waits for versions, the recent past answers `since`. */
export async function createChangeFeed(deps: ChangeFeedDeps): Promise<ChangeFeed> {
  const { log, published, logger } = deps;
  // What requests read of the log (bounds, older changes): a 503 within a bound while Redis is
  // away. The tail reads `log` as it is: it waits out an outage and reads on.
  const reads = boundedChangeLog(log);
  const listeners = new Set<FeedListener>();
  const resetListeners = new Set<(position: number) => void>();
  const recent = createRecentChanges(deps.recent ?? 10_000);
  /** The last position handed to listeners. */
  let position = 0;

  const release = (c: LoggedChange) => {
    const event = toFeedEvent(c);
    position = c.seq;
    recent.push(event);
    for (const l of listeners) {
      try {
        l(event);
      } catch (err) {
        logger.error({ err }, 'a change listener failed');
      }
    }
  };
  const hold = createHold({ published, holdTimeoutMs: deps.holdTimeoutMs ?? 2000, release });
  /** The newest change of each file in the read under way. */
  const named = new Map<string, LoggedChange>();
  const tail = startTail({
    tail: deps.tail,
    log,
    logger,
    blockMs: deps.blockMs ?? 5000,
    start: (last) => (position = last),
    reset(to) {
      hold.clear();
      recent.clear();
      position = to;
      for (const l of resetListeners) l(to);
    },
    take(c) {
      named.set(c.entry.filename, c);
      hold.add(c);
    },
    read() {
      // The log is often read before the announcement arrives: each file's newest version in
      // this read starts loading now (an older one of the same read would only be superseded).
      for (const c of named.values()) published.heard(c.entry, c.seq);
      named.clear();
      hold.flush();
    },
  });

  return {
    get position() {
      return position;
    },
    ready: tail.ready,
    get started() {
      return tail.started;
    },
    bounds: () => reads.bounds(),
    async since(after, allows, limit, scan = DEFAULT_SCAN): Promise<SinceResult> {
      if (after < recent.startsAfter(position)) return sinceInLog(reads, after, allows, limit, scan, position);
      return recent.since(after, allows, limit, scan, position);
    },
    remembers: (after) => after <= position && after >= recent.startsAfter(position),
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    onReset(listener) {
      resetListeners.add(listener);
      return () => resetListeners.delete(listener);
    },
    get listeners() {
      return listeners.size;
    },
    async close() {
      hold.close();
      tail.close();
    },
  };
}
