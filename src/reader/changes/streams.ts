/**
 * The open /v1/stream connections of one reader process: each gets the changes of the files its
 * key may read, as server-sent events, in order, each once. One heartbeat timer for all of them
 * (a comment line), one listener on the change feed for all of them (broadcast.ts: each change's
 * frame is made once and written to every stream that may see it). A stream holds its sink
 * (stream-sink.ts: over HTTP/1.1 the socket alone) and its position, nothing of its request.
 *
 * Bounds: a number of open streams per key (its plan's `streams`). A client that has more than
 * `maxBufferedBytes` waiting unread gets nothing more until it has read them; then it catches up
 * from the feed (memory, else Redis), in order, so a burst costs it nothing and costs the process
 * at most that much per stream. A client that stays behind for two heartbeats is ended with a
 * `dropped` event (it resumes with Last-Event-ID). A revoked key's streams end at once with a
 * `revoked` event; when the log moved out of reach every stream ends with `reset`.
 *
 * Conflation (`conflateMs` > 0, conflate.ts): at most one write of changes per window; a stream
 * catching up gets the latest change of each file of each page it reads.
 */
import type { Principal } from '../../keys/ring.js';
import { createBroadcast } from './broadcast.js';
import { createConflation, type Conflation } from './conflate.js';
import { createWindowTimers } from './window-timers.js';
import type { ChangeFeed } from './feed.js';
import { createTurnMemo } from './turn-memo.js';
import type { FeedEvent } from './event.js';
import type { StreamSink } from './stream-sink.js';

export interface StreamCounters {
  opened?(): void;
  closed?(): void;
  sent?(events: number): void;
  droppedSlow?(): void;
}

export interface StreamHubDeps {
  readonly feed: ChangeFeed;
  readonly heartbeatMs: number;
  readonly maxBufferedBytes: number;
  /** Told of a revoked key id (KeyRing.onRevoked). */
  readonly onRevoked: (listener: (id: string) => void) => () => void;
  readonly counters?: StreamCounters | undefined;
  /** Tells clients how long to wait before reconnecting, ms. */
  readonly retryMs?: number;
}

type Replay = (after: number) => Promise<{ events: FeedEvent[]; next: number }>;

interface OpenStream {
  readonly principal: Principal;
  readonly out: StreamSink;
  readonly replay: Replay;
  /** The last position written (or skipped as not allowed). */
  cursor: number;
  /** Behind: live changes are not written; the catch-up reads them from the feed once the client has read. */
  behind: boolean;
  /** Since when it is behind (ms). */
  behindSince: number;
  /** At most one write of changes per window, when the client asked for it. */
  conflation: Conflation | undefined;
}

export interface StreamHub {
  /** Open streams of this key (rateKey) now. */
  countFor(principal: Principal): number;
  readonly open: number;
  /**
   * Start a stream on `out` (its head written) after position `after`: `replay` yields the
   * changes between `after` and the feed's position; live changes follow.
   */
  start(principal: Principal, out: StreamSink, after: number, replay: Replay, conflateMs?: number): Promise<void>;
  /** End every stream (shutdown). */
  closeAll(): void;
}

const HEARTBEAT = Buffer.from(':\n\n');

export function createStreamHub(deps: StreamHubDeps): StreamHub {
  const { feed, maxBufferedBytes, counters } = deps;
  const streams = new Set<OpenStream>();
  /** What the broadcast visits: every stream but the conflated ones waiting for their window's end. */
  const live = new Set<OpenStream>();
  const perKey = new Map<string, number>();
  const retryFrame = Buffer.from(`retry: ${deps.retryMs ?? 2000}\n\n`);
  const windows = createWindowTimers();

  const end = (s: OpenStream, event?: string, data?: unknown) => {
    if (!streams.delete(s)) return;
    live.delete(s);
    const n = (perKey.get(s.principal.rateKey) ?? 1) - 1;
    if (n <= 0) perKey.delete(s.principal.rateKey);
    else perKey.set(s.principal.rateKey, n);
    counters?.closed?.();
    s.conflation?.stop();
    s.out.end(event === undefined ? undefined : `event: ${event}\ndata: ${JSON.stringify(data ?? {})}\n\n`);
  };

  /** Write `frame`; over the bound, the stream falls behind until its client has read. */
  const write = (s: OpenStream, frame: Buffer): void => {
    s.out.write(frame);
    if (s.out.writableLength > maxBufferedBytes) fallBehind(s);
  };

  /**
   * A conflated stream's write of positions `from` to `to`: the latest change of each allowed file,
   * in position order, as one write, made once per allow-list and range in a turn of the event loop
   * (streams whose windows end together flush together). A range no longer in memory is read as a
   * catch-up.
   */
  const framesMemo = createTurnMemo<{ frame: Buffer; count: number }>();
  const heldFor = (s: OpenStream, from: number, to: number) =>
    framesMemo(s.principal.patterns, `${from}:${to}`, () => {
      const events = broadcast.range(from, to);
      if (!events) return undefined;
      const latest = new Map<string, FeedEvent>();
      for (const e of events) {
        if (!s.principal.allows(e.filename)) continue;
        latest.delete(e.filename);
        latest.set(e.filename, e);
      }
      const frames = [...latest.values()].map((e) => e.frame);
      return { frame: frames.length === 1 ? frames[0]! : Buffer.concat(frames), count: frames.length };
    });

  /** A conflated stream's changes after its cursor up to `to`, as one write; false when nothing was written. */
  const writeHeld = (s: OpenStream, to: number): boolean => {
    // Behind: its catch-up writes them.
    if (!streams.has(s) || s.behind || to <= s.cursor) return false;
    const held = heldFor(s, s.cursor + 1, to);
    if (held === undefined) {
      s.behind = true;
      s.behindSince = Date.now();
      void catchUp(s);
      return false;
    }
    s.cursor = to;
    if (held.count === 0) return false;
    write(s, held.frame);
    counters?.sent?.(held.count);
    return true;
  };

  const fallBehind = (s: OpenStream): void => {
    if (!s.behind) {
      s.behind = true;
      s.behindSince = Date.now();
    }
    s.out.onceDrain(() => void catchUp(s));
  };

  /** The events of a catch-up page after the cursor, moving it; conflated: the latest change of each file. */
  const pageFrames = (s: OpenStream, events: readonly FeedEvent[]): Buffer[] => {
    const latest = new Map<string, FeedEvent>();
    const frames: Buffer[] = [];
    for (const e of events) {
      if (e.seq <= s.cursor) continue;
      s.cursor = e.seq;
      if (!s.conflation) frames.push(e.frame);
      else {
        latest.delete(e.filename);
        latest.set(e.filename, e);
      }
    }
    if (s.conflation) for (const e of latest.values()) frames.push(e.frame);
    return frames;
  };

  /** Write what the stream missed since its cursor, a page per write, until it is level with the feed. */
  const catchUp = async (s: OpenStream): Promise<void> => {
    try {
      for (;;) {
        const before = s.cursor;
        const page = await s.replay(before);
        if (!streams.has(s)) return;
        const frames = pageFrames(s, page.events);
        if (frames.length > 0) {
          s.out.write(frames.length === 1 ? frames[0]! : Buffer.concat(frames));
          s.conflation?.wrote();
          counters?.sent?.(frames.length);
        }
        s.cursor = Math.max(s.cursor, page.next);
        if (s.out.writableLength > maxBufferedBytes) return fallBehind(s);
        if (s.cursor >= feed.position || s.cursor === before) break;
      }
      s.behind = false;
    } catch {
      end(s, 'reset', { position: feed.position, detail: 'The change log could not be read; reconnect with Last-Event-ID.' });
    }
  };

  const broadcast = createBroadcast<OpenStream>({
    receivers: () => live,
    open: (s) => streams.has(s),
    write,
    sent: counters?.sent,
  });
  const unsubscribe = feed.subscribe(broadcast.push);
  const unreset = feed.onReset((position) => {
    for (const s of [...streams])
      end(s, 'reset', { position, detail: 'The change log moved out of reach; list the files again (GET /v1/catalog) and stream from its position.' });
  });
  const unrevoke = deps.onRevoked((id) => {
    for (const s of [...streams]) if (s.principal.id === id) end(s, 'revoked', { detail: 'The API key was revoked.' });
  });
  const heartbeat = setInterval(() => {
    const now = Date.now();
    for (const s of [...streams]) {
      if (!s.behind) write(s, HEARTBEAT);
      else if (now - s.behindSince > 2 * deps.heartbeatMs) {
        counters?.droppedSlow?.();
        end(s, 'dropped', { reason: 'slow', position: s.cursor, detail: 'The client read too slowly; reconnect with Last-Event-ID to resume.' });
      }
    }
  }, deps.heartbeatMs);
  heartbeat.unref();

  return {
    countFor: (principal) => perKey.get(principal.rateKey) ?? 0,
    get open() {
      return streams.size;
    },
    async start(principal, out, after, replay, conflateMs = 0) {
      // Behind from the start: the catch-up writes the changes since `after`, then it is live.
      const s: OpenStream = { principal, out, replay, cursor: after, behind: true, behindSince: Date.now(), conflation: undefined };
      if (conflateMs > 0)
        s.conflation = createConflation({
          windowMs: conflateMs,
          timers: windows,
          emit: (to) => writeHeld(s, to),
          latest: () => feed.position,
          pause: () => live.delete(s),
          resume: () => void (streams.has(s) && live.add(s)),
        });
      streams.add(s);
      live.add(s);
      perKey.set(principal.rateKey, (perKey.get(principal.rateKey) ?? 0) + 1);
      counters?.opened?.();
      out.onClose(() => end(s));
      out.write(retryFrame);
      await catchUp(s);
    },
    closeAll() {
      unsubscribe();
      unreset();
      unrevoke();
      clearInterval(heartbeat);
      for (const s of [...streams]) end(s);
      windows.clear();
    },
  };
}
