/**
 * The broadcast of live changes to a process's streams. Changes that arrive together (one read of
 * the log, released at once) leave together; while a broadcast is still writing (in slices of
 * SLICE streams per turn of the event loop, so that thousands of streams leave room for requests),
 * the changes that arrive meanwhile wait for it and then leave as one write per stream. A reader
 * that keeps up writes each change as it comes; one that cannot sends what is pending in one write.
 * Streams level with the feed share one Buffer per allow-list; a stream with a cursor of its own
 * (just caught up) gets its own.
 */
import type { Principal } from '../../keys/ring.js';
import type { Conflation } from './conflate.js';
import type { FeedEvent } from './event.js';

/** What of a stream the broadcast reads and moves. */
export interface Receiver {
  readonly principal: Pick<Principal, 'patterns' | 'allows'>;
  /** The last position written (or skipped as not allowed). */
  cursor: number;
  /** Behind: live changes are not written; its catch-up reads them from the feed. */
  readonly behind: boolean;
  readonly conflation: Conflation | undefined;
}

export interface BroadcastDeps<R extends Receiver> {
  /** The streams to visit now (a copy is taken per broadcast): conflated ones waiting for their window's end may be left out. */
  readonly receivers: () => Iterable<R>;
  /** Still open (a stream may end while a broadcast is under way). */
  readonly open: (r: R) => boolean;
  /** Write `frame` (`count` events) to `r`. */
  readonly write: (r: R, frame: Buffer) => void;
  /** Events written, counted once per slice. */
  readonly sent?: ((events: number) => void) | undefined;
}

/** Streams written to per turn of the event loop. */
const SLICE = 500;

interface Frames {
  readonly frame: Buffer;
  readonly count: number;
  readonly last: number;
}

/** What of `batch` a stream at `cursor` with these patterns gets: one buffer, how many events it holds, the last position. */
function framesFor(batch: readonly FeedEvent[], cursor: number, allows: (f: string) => boolean): Frames | undefined {
  const frames: Buffer[] = [];
  let last = cursor;
  for (const e of batch) {
    if (e.seq <= cursor) continue;
    last = e.seq;
    if (allows(e.filename)) frames.push(e.frame);
  }
  if (last === cursor) return undefined;
  return { frame: frames.length === 1 ? frames[0]! : Buffer.concat(frames), count: frames.length, last };
}

export interface Broadcast {
  /** Takes each change the feed releases. */
  push(e: FeedEvent): void;
  /** The live changes of positions `from` to `to`, while they are among the last RECENT; else undefined. */
  range(from: number, to: number): readonly FeedEvent[] | undefined;
}

/** Live changes kept for conflated streams' ranges. */
const RECENT = 20_000;

export function createBroadcast<R extends Receiver>(deps: BroadcastDeps<R>): Broadcast {
  /** The last live changes, consecutive positions (a gap, a reset, starts it again). */
  let recent: FeedEvent[] = [];
  let queue: FeedEvent[] = [];
  let batch: FeedEvent[] = [];
  let list: R[] = [];
  let shared = new Map<readonly string[], Frames | undefined>();
  let next = 0;
  let scheduled = false;

  const deliver = (s: R, first: number): number => {
    if (s.conflation) {
      // Written now or at its window's end, by the conflation (from the recent changes).
      const last = batch.at(-1)!.seq;
      if (last > s.cursor) s.conflation.changed(last);
      return 0;
    }
    let out: Frames | undefined;
    if (s.cursor === first - 1) {
      const key = s.principal.patterns;
      if (!shared.has(key)) shared.set(key, framesFor(batch, first - 1, s.principal.allows));
      out = shared.get(key);
    } else out = framesFor(batch, s.cursor, s.principal.allows);
    if (out === undefined) return 0;
    s.cursor = out.last;
    if (out.count === 0) return 0;
    deps.write(s, out.frame);
    return out.count;
  };

  const pump = (): void => {
    scheduled = false;
    for (;;) {
      if (next === 0) {
        if (queue.length === 0) return;
        batch = queue;
        queue = [];
        list = [...deps.receivers()];
        shared = new Map();
      }
      const first = batch[0]!.seq;
      const stop = Math.min(next + SLICE, list.length);
      // Counted once per slice: a counter call per stream and event is measurable at this rate.
      let sent = 0;
      for (; next < stop; next++) {
        const s = list[next]!;
        if (!s.behind && deps.open(s)) sent += deliver(s, first);
      }
      if (sent > 0) deps.sent?.(sent);
      if (next < list.length) {
        setImmediate(pump);
        return;
      }
      next = 0;
    }
  };

  const remember = (e: FeedEvent) => {
    if (recent.length > 0 && recent.at(-1)!.seq + 1 !== e.seq) recent = [];
    recent.push(e);
    if (recent.length > 2 * RECENT) recent = recent.slice(-RECENT);
  };

  const push = (e: FeedEvent) => {
    remember(e);
    queue.push(e);
    // The changes released in the same turn (a read of the log) go as one batch, at once.
    if (next === 0 && !scheduled) {
      scheduled = true;
      queueMicrotask(pump);
    }
  };
  const range = (from: number, to: number) => {
    const first = recent[0]?.seq;
    if (first === undefined || from < first || to > recent.at(-1)!.seq) return undefined;
    return recent.slice(from - first, to - first + 1);
  };
  return { push, range };
}
