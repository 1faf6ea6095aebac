/**
 * Conflation of one stream (`conflate=<ms>`): at most one write of changes per window. A change to
 * a stream written to less than a window ago is held, only the latest of each file, and the held
 * changes are written together, in position order, when the window ends; a stream quiet for a
 * window gets its next change at once. Positions still increase, so Last-Event-ID resumes as
 * without it: a change left out was replaced by a later one of the same file that was sent.
 *
 * The ends of windows are kept by one timer for all of a process's streams (window-timers.ts),
 * not one per stream: thousands of conflated streams cost one timer, not thousands.
 */
import type { FeedEvent } from './event.js';
import type { WindowTimers } from './window-timers.js';

export interface Conflation {
  /** Hold `events` (allowed, after the stream's cursor); written at once when the window has passed. */
  hold(events: readonly FeedEvent[]): void;
  /** Write what is held now, if anything. */
  flush(): void;
  /** A write of changes made without this window's help (a catch-up page): the window starts again. */
  wrote(): void;
  /** Drop what is held (the stream ended). */
  stop(): void;
}

class HeldChanges implements Conflation {
  private readonly held = new Map<string, FeedEvent>();
  private lastWrite = 0;
  /** A window end is scheduled (only one at a time). */
  private waiting = false;
  private stopped = false;

  constructor(
    private readonly windowMs: number,
    private readonly emit: (events: FeedEvent[]) => void,
    private readonly timers: WindowTimers,
  ) {}

  hold(events: readonly FeedEvent[]): void {
    for (const e of events) {
      this.held.delete(e.filename);
      this.held.set(e.filename, e);
    }
    if (this.waiting || this.held.size === 0) return;
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
    if (this.held.size > 0 && due > Date.now()) return this.timers.at(due, this);
    this.waiting = false;
    this.flush();
  }

  flush(): void {
    if (this.held.size === 0) return;
    const events = [...this.held.values()].sort((x, y) => x.seq - y.seq);
    this.held.clear();
    this.lastWrite = Date.now();
    this.emit(events);
  }

  wrote(): void {
    this.lastWrite = Date.now();
  }

  stop(): void {
    this.stopped = true;
    this.held.clear();
  }
}

/** `emit` writes the held changes, in position order, as one write. */
export function createConflation(windowMs: number, emit: (events: FeedEvent[]) => void, timers: WindowTimers): Conflation {
  return new HeldChanges(windowMs, emit, timers);
}
