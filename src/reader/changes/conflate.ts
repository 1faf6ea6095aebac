/**
 * Conflation of one stream (`conflate=<ms>`): at most one write of changes per window. A change to
 * a stream written to less than a window ago waits, and when the window ends the stream gets
 * everything after its cursor as one write, the latest change of each file, in position order; a
 * stream quiet for a window gets its next change at once. Positions still increase, so
 * Last-Event-ID resumes as without it: a change left out was replaced by a later one of the same
 * file that was sent.
 *
 * A waiting stream holds nothing (its cursor says where it is; the stream hub makes the write of a
 * range once for all the streams of an allow-list that flush it together) and is not visited by
 * the broadcast until its window ends (`pause` / `resume`): a change costs the conflated streams
 * only the ones whose window has passed. The ends of windows are kept by one timer for all of a
 * process's streams (window-timers.ts).
 */
import type { WindowTimers } from './window-timers.js';

export interface Conflation {
  /** Changes up to `last` are out: written now when the window has passed, else when it ends. */
  changed(last: number): void;
  /** A write of changes made without this window's help (a catch-up page): the window starts again. */
  wrote(): void;
  /** Forget the window (the stream ended). */
  stop(): void;
}

export interface ConflationDeps {
  readonly windowMs: number;
  readonly timers: WindowTimers;
  /** Write what comes after the stream's cursor up to `to` (the latest of each allowed file) as one write; false when nothing was written. */
  readonly emit: (to: number) => boolean;
  /** The feed's last position (what a window's end writes up to). */
  readonly latest: () => number;
  /** The window started: the broadcast need not visit the stream until it ends. */
  readonly pause: () => void;
  /** The window ended: the broadcast visits the stream again. */
  readonly resume: () => void;
}

class Window implements Conflation {
  private lastWrite = 0;
  /** A window end is scheduled (only one at a time). */
  private waiting = false;
  private stopped = false;

  constructor(private readonly deps: ConflationDeps) {}

  changed(last: number): void {
    if (this.waiting || this.stopped) return;
    const due = this.lastWrite + this.deps.windowMs;
    if (due <= Date.now()) {
      if (this.deps.emit(last)) this.lastWrite = Date.now();
    } else {
      this.waiting = true;
      this.deps.pause();
      this.deps.timers.at(due, this);
    }
  }

  /** The window ended (window-timers.ts). */
  due(): void {
    if (this.stopped) return;
    // Written meanwhile (a catch-up page): its window starts from that write.
    const due = this.lastWrite + this.deps.windowMs;
    if (due > Date.now()) return this.deps.timers.at(due, this);
    this.waiting = false;
    if (this.deps.emit(this.deps.latest())) this.lastWrite = Date.now();
    this.deps.resume();
  }

  wrote(): void {
    this.lastWrite = Date.now();
  }

  stop(): void {
    this.stopped = true;
  }
}

export function createConflation(deps: ConflationDeps): Conflation {
  return new Window(deps);
}
