/**
 * Conflation of one stream (`conflate=<ms>`): at most one write of changes per window. A change to
 * a stream written to less than a window ago is held, only the latest of each file, and the held
 * changes are written together, in position order, when the window ends; a stream quiet for a
 * window gets its next change at once. Positions still increase, so Last-Event-ID resumes as
 * without it: a change left out was replaced by a later one of the same file that was sent.
 *
 * A stream holds only the range of positions it has not been sent (the stream hub makes the
 * latest change of each file of that range, once for all the streams of an allow-list that flush
 * the same range), and the ends of windows are kept by one timer for all of a process's streams
 * (window-timers.ts): thousands of conflated streams cost little more than one.
 */
import type { FeedEvent } from './event.js';
import type { WindowTimers } from './window-timers.js';

export interface Conflation {
  /** Hold `events` (allowed, after the stream's cursor, in order); written at once when the window has passed. */
  hold(events: readonly FeedEvent[]): void;
  /** Write what is held now, if anything. */
  flush(): void;
  /** A write of changes made without this window's help (a catch-up page): the window starts again. */
  wrote(): void;
  /** Drop what is held (the stream ended). */
  stop(): void;
}

/** Writes the latest change of each allowed file of positions `from` to `to`, in position order, as one write. */
export type EmitRange = (from: number, to: number) => void;

class HeldChanges implements Conflation {
  /** The positions held (0: none). */
  private from = 0;
  private to = 0;
  private lastWrite = 0;
  /** A window end is scheduled (only one at a time). */
  private waiting = false;
  private stopped = false;

  constructor(
    private readonly windowMs: number,
    private readonly emit: EmitRange,
    private readonly timers: WindowTimers,
  ) {}

  hold(events: readonly FeedEvent[]): void {
    if (events.length > 0) {
      if (this.from === 0) this.from = events[0]!.seq;
      this.to = events.at(-1)!.seq;
    }
    if (this.waiting || this.from === 0) return;
    const due = this.lastWrite + this.windowMs;
    if (due <= Date.now()) this.flush();
    else {
      this.waiting = true;
      this.timers.at(due, this);
    }
  }

  /** The window ended (window-timers.ts). */
  due(): void {
    if (this.stopped) return;
    // Written meanwhile (a slow stream's flush): its window starts from that write.
    const due = this.lastWrite + this.windowMs;
    if (this.from !== 0 && due > Date.now()) return this.timers.at(due, this);
    this.waiting = false;
    this.flush();
  }

  flush(): void {
    if (this.from === 0) return;
    const { from, to } = this;
    this.from = 0;
    this.lastWrite = Date.now();
    this.emit(from, to);
  }

  wrote(): void {
    this.lastWrite = Date.now();
  }

  stop(): void {
    this.stopped = true;
    this.from = 0;
  }
}

export function createConflation(windowMs: number, emit: EmitRange, timers: WindowTimers): Conflation {
  return new HeldChanges(windowMs, emit, timers);
}
