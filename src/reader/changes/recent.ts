/**
 * The recent past of the change feed: the last changes handed on, kept in memory so most
 * `since` questions are answered without Redis, and the read of older ones from the log.
 */
import type { ChangeLog } from '../../catalog/change-log.js';
import { toFeedEvent, type FeedEvent } from './event.js';

export interface SinceResult {
  readonly events: FeedEvent[];
  /** The position to ask for next: the last change looked at (matching or not). */
  readonly next: number;
}

export type Allows = (filename: string) => boolean;

export interface RecentChanges {
  /** The position the kept events start after (`position` when none are kept). */
  startsAfter(position: number): number;
  push(event: FeedEvent): void;
  clear(): void;
  /** Kept events after `after`, as `ChangeFeed.since`; `position` is the feed's. */
  since(after: number, allows: Allows, limit: number, scan: number, position: number): SinceResult;
}

/** Keeps the last `max` events (trimmed in batches, at a quarter over). */
export function createRecentChanges(max: number): RecentChanges {
  // Oldest first; `recent[0].seq - 1` is the position they start after.
  let recent: FeedEvent[] = [];
  return {
    startsAfter: (position) => (recent.length > 0 ? recent[0]!.seq - 1 : position),
    push(event) {
      recent.push(event);
      if (recent.length > max * 1.25) recent = recent.slice(recent.length - max);
    },
    clear() {
      recent = [];
    },
    since(after, allows, limit, scan, position) {
      const events: FeedEvent[] = [];
      let next = after;
      let looked = 0;
      for (let i = firstAfter(recent, after); i < recent.length && events.length < limit && looked < scan; i++) {
        const e = recent[i]!;
        looked++;
        next = e.seq;
        if (allows(e.filename)) events.push(e);
      }
      if (looked === 0) next = Math.max(after, position);
      return { events, next };
    },
  };
}

/** Binary search for the index of the first event after `after`. */
function firstAfter(events: readonly FeedEvent[], after: number): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (events[mid]!.seq <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The same question for positions older than memory holds, read from the log up to `position`. */
export async function sinceInLog(log: ChangeLog, after: number, allows: Allows, limit: number, scan: number, position: number): Promise<SinceResult> {
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
}
