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
import { supersedes } from '../data/version.js';
import { toFeedEvent, type FeedEvent } from './event.js';

export interface ChangeFeedDeps {
  /** Reads with XREAD BLOCK: a connection of its own. */
  readonly tail: ChangeLog;
  /** Range and bounds reads: the command connection. */
  readonly log: ChangeLog;
  readonly published: PublishedCache;
  readonly logger: Logger;
  /** How many recent changes are kept in memory (older ones are read from Redis). */
  readonly recent?: number;
  readonly holdTimeoutMs?: number;
  readonly blockMs?: number;
}

export type FeedListener = (event: FeedEvent) => void;

export interface SinceResult {
  readonly events: FeedEvent[];
  /** The position to ask for next: the last change looked at (matching or not). */
  readonly next: number;
}

export interface ChangeFeed {
  /** The last position handed to listeners. */
  readonly position: number;
  /** Resolves once the feed knows its starting position. */
  readonly ready: Promise<void>;
  /** True once it does (until then, positions cannot be checked). */
  readonly started: boolean;
  bounds(): Promise<LogBounds>;
  /**
   * Changes after `after` (up to the feed's position) that `allows` lets through, oldest first: at
   * most `limit` of them, looking at most at `scan` changes. From memory when recent enough.
   */
  since(after: number, allows: (filename: string) => boolean, limit: number, scan?: number): Promise<SinceResult>;
  subscribe(listener: FeedListener): () => void;
  /** Told when the log moved out of reach: every position before `position` is gone. */
  onReset(listener: (position: number) => void): () => void;
  /** Listeners now (streams and long-polls). */
  readonly listeners: number;
  close(): Promise<void>;
}

const FIRST_RETRY_MS = 250;
const MAX_RETRY_MS = 5000;
const READ_COUNT = 1000;
const DEFAULT_SCAN = 10_000;

export async function createChangeFeed(deps: ChangeFeedDeps): Promise<ChangeFeed> {
  const { tail, log, published, logger } = deps;
  const recentMax = deps.recent ?? 10_000;
  const holdTimeoutMs = deps.holdTimeoutMs ?? 2000;
  const blockMs = deps.blockMs ?? 5000;
  const listeners = new Set<FeedListener>();
  const resetListeners = new Set<(position: number) => void>();
  // Recent events, oldest first; `recent[0].seq - 1` is the position they start after.
  let recent: FeedEvent[] = [];
  /** Read from the log, not yet handed on (waiting for this reader to hold their version). */
  const pending: { change: LoggedChange; since: number }[] = [];
  let position = 0;
  let readPosition = 0;
  let closed = false;
  let holdTimer: NodeJS.Timeout | undefined;

  const held = (c: LoggedChange): boolean => {
    const v = published.get(c.entry.filename);
    if (v === undefined) return !published.serves(c.entry.filename);
    return v.entry.sha256 === c.entry.sha256 || supersedes(v.entry, v.seq, { entry: c.entry, seq: c.seq });
  };

  const emit = (c: LoggedChange) => {
    const event = toFeedEvent(c);
    position = c.seq;
    recent.push(event);
    if (recent.length > recentMax * 1.25) recent = recent.slice(recent.length - recentMax);
    for (const l of listeners) {
      try {
        l(event);
      } catch (err) {
        logger.error({ err }, 'a change listener failed');
      }
    }
  };

  /** Hand on every pending change whose version is held, in order; the head waits at most holdTimeoutMs. */
  const flush = () => {
    const now = Date.now();
    while (pending.length > 0) {
      const head = pending[0]!;
      if (!held(head.change) && now - head.since < holdTimeoutMs) break;
      pending.shift();
      emit(head.change);
    }
    if (holdTimer) clearTimeout(holdTimer);
    holdTimer = undefined;
    if (pending.length > 0 && !closed) {
      holdTimer = setTimeout(flush, Math.max(1, holdTimeoutMs - (now - pending[0]!.since)));
      holdTimer.unref();
    }
  };
  const unwatch = published.onInstall(() => {
    if (pending.length > 0) flush();
  });

  const reset = (to: number) => {
    logger.warn({ from: readPosition, to }, 'the change log moved out of reach; streams start again');
    pending.length = 0;
    recent = [];
    position = to;
    readPosition = to;
    for (const l of resetListeners) l(to);
  };

  const accept = (changes: readonly LoggedChange[]) => {
    for (const c of changes) {
      if (c.seq <= readPosition) continue;
      // Positions are consecutive: a hole means the log was trimmed past us.
      if (c.seq !== readPosition + 1 && readPosition !== 0) {
        reset(c.seq - 1);
      }
      readPosition = c.seq;
      pending.push({ change: c, since: Date.now() });
    }
    flush();
  };

  let resolveReady!: () => void;
  const ready = new Promise<void>((r) => (resolveReady = r));
  let started = false;
  /** Ends the wait between two attempts (close). */
  let wake: (() => void) | undefined;
  const loop = async () => {
    let delay = FIRST_RETRY_MS;
    while (!closed) {
      try {
        if (!started) {
          const b = await log.bounds();
          position = readPosition = b.last;
          started = true;
          resolveReady();
        }
        const changes = await tail.read(readPosition, READ_COUNT, blockMs);
        if (closed) break;
        if (changes.length === 0) {
          // Quiet, or the log restarted below us (Redis lost its data): the head tells.
          const b = await log.bounds();
          if (b.last < readPosition) reset(b.last);
        }
        accept(changes);
        delay = FIRST_RETRY_MS;
      } catch (err) {
        if (closed) break;
        logger.debug({ err: { message: (err as Error).message } }, 'reading the change log failed; retrying');
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, delay).unref();
        });
        delay = Math.min(delay * 2, MAX_RETRY_MS);
      }
    }
  };
  const running = loop();

  const fromRedis = async (after: number, allows: (f: string) => boolean, limit: number, scan: number): Promise<SinceResult> => {
    const events: FeedEvent[] = [];
    let next = after;
    let looked = 0;
    let more = true;
    while (more && events.length < limit && looked < scan && next < position) {
      const page = await log.range(next, Math.min(1000, scan - looked));
      more = page.length > 0;
      for (const c of page) {
        // Past what this reader has handed on: the rest comes live.
        if (c.seq > position) {
          more = false;
          break;
        }
        looked++;
        next = c.seq;
        if (allows(c.entry.filename)) events.push(toFeedEvent(c));
        if (events.length >= limit) break;
      }
    }
    return { events, next };
  };

  return {
    get position() {
      return position;
    },
    ready,
    get started() {
      return started;
    },
    bounds: () => log.bounds(),
    async since(after, allows, limit, scan = DEFAULT_SCAN) {
      const start = recent.length > 0 ? recent[0]!.seq - 1 : position;
      if (after < start) return fromRedis(after, allows, limit, scan);
      const events: FeedEvent[] = [];
      let next = after;
      let looked = 0;
      // Binary search for the first event after `after`.
      let lo = 0;
      let hi = recent.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (recent[mid]!.seq <= after) lo = mid + 1;
        else hi = mid;
      }
      for (let i = lo; i < recent.length && events.length < limit && looked < scan; i++) {
        const e = recent[i]!;
        looked++;
        next = e.seq;
        if (allows(e.filename)) events.push(e);
      }
      if (looked === 0) next = Math.max(after, position);
      return { events, next };
    },
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
      closed = true;
      unwatch();
      if (holdTimer) clearTimeout(holdTimer);
      wake?.();
      resolveReady();
      // Not waited for: a read on a Redis that does not answer ends when its connection is closed
      // (the owner's job), and what it returns after this is dropped.
      void running;
    },
  };
}
