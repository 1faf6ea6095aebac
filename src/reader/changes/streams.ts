/**
 * The open /v1/stream connections of one reader process: each gets the changes of the files its
 * key may read, as server-sent events, in order, each once. One heartbeat timer for all of them
 * (a comment line), one listener on the change feed for all of them (each change's frame is made
 * once and written to every stream that may see it).
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
import type { ServerResponse } from 'node:http';
import type { Writable } from 'node:stream';
import type { Principal } from '../../keys/ring.js';
import { createConflation, type Conflation } from './conflate.js';
import type { ChangeFeed } from './feed.js';
import type { FeedEvent } from './event.js';

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

/** Where a stream's bytes go: the socket itself over HTTP/1.1 (no chunk framing per event), the response over HTTP/2. */
type Sink = Pick<Writable, 'write' | 'once' | 'writableLength'>;

interface OpenStream {
  readonly principal: Principal;
  readonly res: ServerResponse;
  readonly out: Sink;
  readonly replay: (after: number) => Promise<{ events: FeedEvent[]; next: number }>;
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
   * Start a stream on `res` (headers not sent yet) after position `after`: `replay` yields the
   * changes between `after` and the feed's position; live changes follow.
   */
  start(
    principal: Principal,
    res: ServerResponse,
    after: number,
    replay: (after: number) => Promise<{ events: FeedEvent[]; next: number }>,
    conflateMs?: number,
  ): Promise<void>;
  /** End every stream (shutdown). */
  closeAll(): void;
}

const HEARTBEAT = Buffer.from(':\n\n');
const END_GRACE_MS = 5000;
/** Streams written to per turn of the event loop. */
const SLICE = 500;

export function createStreamHub(deps: StreamHubDeps): StreamHub {
  const { feed, maxBufferedBytes, counters } = deps;
  const streams = new Set<OpenStream>();
  const perKey = new Map<string, number>();
  const retryFrame = Buffer.from(`retry: ${deps.retryMs ?? 2000}\n\n`);

  const end = (s: OpenStream, event?: string, data?: unknown) => {
    if (!streams.delete(s)) return;
    const n = (perKey.get(s.principal.rateKey) ?? 1) - 1;
    if (n <= 0) perKey.delete(s.principal.rateKey);
    else perKey.set(s.principal.rateKey, n);
    counters?.closed?.();
    s.conflation?.stop();
    // Closed by its client: nothing to end (the route gives it its request line and count).
    if (s.res.destroyed) return;
    if (event !== undefined) s.out.write(`event: ${event}\ndata: ${JSON.stringify(data ?? {})}\n\n`);
    s.res.end();
    // A client that reads nothing never lets the end through: give it a few seconds, no more.
    const t = setTimeout(() => s.res.destroy(), END_GRACE_MS);
    t.unref();
    s.res.once('close', () => clearTimeout(t));
  };

  /** Write `frame`; over the bound, the stream falls behind until its client has read. */
  const write = (s: OpenStream, frame: Buffer): void => {
    s.out.write(frame);
    if (s.out.writableLength > maxBufferedBytes) fallBehind(s);
  };

  /** A conflated stream's held changes, in position order, as one write. */
  const writeHeld = (s: OpenStream, events: FeedEvent[]): void => {
    if (!streams.has(s)) return;
    write(s, events.length === 1 ? events[0]!.frame : Buffer.concat(events.map((e) => e.frame)));
    counters?.sent?.(events.length);
  };

  const fallBehind = (s: OpenStream): void => {
    // What is held goes first: the catch-up writes only what comes after the cursor.
    s.conflation?.flush();
    if (!s.behind) {
      s.behind = true;
      s.behindSince = Date.now();
    }
    s.out.once('drain', () => void catchUp(s));
  };

  /** Write what the stream missed since its cursor, page by page, until it is level with the feed. */
  const catchUp = async (s: OpenStream): Promise<void> => {
    try {
      for (;;) {
        const before = s.cursor;
        const page = await s.replay(before);
        if (!streams.has(s)) return;
        let sent = 0;
        if (s.conflation) {
          // The latest change of each file of the page, in position order, in one write.
          const latest = new Map<string, FeedEvent>();
          for (const e of page.events) {
            if (e.seq <= s.cursor) continue;
            s.cursor = e.seq;
            latest.delete(e.filename);
            latest.set(e.filename, e);
          }
          if (latest.size > 0) {
            s.out.write(Buffer.concat([...latest.values()].map((e) => e.frame)));
            s.conflation.wrote();
            sent = latest.size;
          }
        } else {
          for (const e of page.events) {
            if (e.seq <= s.cursor) continue;
            s.cursor = e.seq;
            s.out.write(e.frame);
            sent++;
          }
        }
        if (sent > 0) counters?.sent?.(sent);
        s.cursor = Math.max(s.cursor, page.next);
        if (s.out.writableLength > maxBufferedBytes) return fallBehind(s);
        if (s.cursor >= feed.position || s.cursor === before) break;
      }
      s.behind = false;
    } catch {
      end(s, 'reset', { position: feed.position, detail: 'The change log could not be read; reconnect with Last-Event-ID.' });
    }
  };

  /** What of `batch` a stream at `cursor` with these patterns gets: one buffer, and how many events it holds. */
  const framesFor = (
    batch: readonly FeedEvent[],
    cursor: number,
    allows: (f: string) => boolean,
  ): { frame: Buffer; count: number; last: number } | undefined => {
    const frames: Buffer[] = [];
    let last = cursor;
    for (const e of batch) {
      if (e.seq <= cursor) continue;
      last = e.seq;
      if (allows(e.filename)) frames.push(e.frame);
    }
    if (last === cursor) return undefined;
    return { frame: frames.length === 1 ? frames[0]! : Buffer.concat(frames), count: frames.length, last };
  };

  /**
   * The changes of `batch` to every stream, in slices of SLICE streams per turn of the event loop,
   * so that a process with thousands of streams keeps answering requests between them. Changes
   * that arrive meanwhile form the next batch: a busy process writes several changes to a stream
   * at once (one write, made once per allow-list), an idle one each change as it comes.
   */
  let queue: FeedEvent[] = [];
  let batch: FeedEvent[] = [];
  let list: OpenStream[] = [];
  let shared = new Map<readonly string[], ReturnType<typeof framesFor>>();
  let next = 0;
  const pump = (): void => {
    for (;;) {
      if (next === 0) {
        if (queue.length === 0) return;
        batch = queue;
        queue = [];
        list = [...streams];
        shared = new Map();
      }
      const first = batch[0]!.seq;
      const stop = Math.min(next + SLICE, list.length);
      // Counted once per slice: a counter call per stream and event is measurable at this rate.
      let sent = 0;
      for (; next < stop; next++) {
        const s = list[next]!;
        if (s.behind || !streams.has(s)) continue;
        if (s.conflation) {
          const mine = batch.filter((e) => e.seq > s.cursor && s.principal.allows(e.filename));
          if (batch.at(-1)!.seq > s.cursor) s.cursor = batch.at(-1)!.seq;
          s.conflation.hold(mine);
          continue;
        }
        // Streams level with the feed (nearly all) share the frames of their allow-list.
        let out: ReturnType<typeof framesFor>;
        if (s.cursor === first - 1) {
          const key = s.principal.patterns;
          if (!shared.has(key)) shared.set(key, framesFor(batch, first - 1, s.principal.allows));
          out = shared.get(key);
        } else out = framesFor(batch, s.cursor, s.principal.allows);
        if (out === undefined) continue;
        s.cursor = out.last;
        if (out.count > 0) {
          write(s, out.frame);
          sent += out.count;
        }
      }
      if (sent > 0) counters?.sent?.(sent);
      if (next < list.length) {
        setImmediate(pump);
        return;
      }
      next = 0;
    }
  };
  const unsubscribe = feed.subscribe((e) => {
    queue.push(e);
    if (next === 0) pump();
  });
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
    async start(principal, res, after, replay, conflateMs = 0) {
      // Behind from the start: the catch-up writes the changes since `after`, then it is live.
      // HTTP/1.1: no chunked framing, the body ends with the connection; events go straight to the socket.
      const http1 = res.req.httpVersionMajor === 1 && res.socket !== null;
      if (http1) res.useChunkedEncodingByDefault = false;
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        'x-accel-buffering': 'no',
      });
      res.flushHeaders();
      const out: Sink = http1 ? res.socket! : res;
      // A stream has its own liveness (heartbeats, the slow-client bound): no idle timer for the
      // socket, which every write would otherwise re-arm.
      if (http1) res.socket!.setTimeout(0);
      const s: OpenStream = {
        principal,
        res,
        out,
        replay,
        cursor: after,
        behind: true,
        behindSince: Date.now(),
        conflation: undefined,
      };
      if (conflateMs > 0) s.conflation = createConflation(conflateMs, (events) => writeHeld(s, events));
      streams.add(s);
      perKey.set(principal.rateKey, (perKey.get(principal.rateKey) ?? 0) + 1);
      counters?.opened?.();
      res.once('close', () => end(s));
      out.write(retryFrame);
      await catchUp(s);
    },
    closeAll() {
      unsubscribe();
      unreset();
      unrevoke();
      clearInterval(heartbeat);
      for (const s of [...streams]) end(s);
    },
  };
}
