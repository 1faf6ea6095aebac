/**
 * Conflation of one stream (`conflate=<ms>`): at most one write of changes per window. A change to
 * a stream written to less than a window ago is held, only the latest of each file, and the held
 * changes are written together, in position order, when the window ends; a stream quiet for a
 * window gets its next change at once. Positions still increase, so Last-Event-ID resumes as
 * without it: a change left out was replaced by a later one of the same file that was sent.
 */
import type { FeedEvent } from './event.js';

export interface Conflation {
  /** Hold `events` (allowed, after the stream's cursor); written at once when the window has passed. */
  hold(events: readonly FeedEvent[]): void;
  /** Write what is held now, if anything. */
  flush(): void;
  /** A write of changes made without this window's help (a catch-up page): the window starts again. */
  wrote(): void;
  /** Drop what is held and the timer (the stream ended). */
  stop(): void;
}

/** `emit` writes the held changes, in position order, as one write. */
export function createConflation(windowMs: number, emit: (events: FeedEvent[]) => void): Conflation {
  const held = new Map<string, FeedEvent>();
  let lastWrite = 0;
  let timer: NodeJS.Timeout | undefined;

  const flush = (): void => {
    clearTimeout(timer);
    timer = undefined;
    if (held.size === 0) return;
    const events = [...held.values()].sort((x, y) => x.seq - y.seq);
    held.clear();
    lastWrite = Date.now();
    emit(events);
  };

  return {
    hold(events) {
      for (const e of events) {
        held.delete(e.filename);
        held.set(e.filename, e);
      }
      if (timer !== undefined || held.size === 0) return;
      const due = lastWrite + windowMs - Date.now();
      if (due <= 0) flush();
      else timer = setTimeout(flush, due);
    },
    flush,
    wrote() {
      lastWrite = Date.now();
    },
    stop() {
      clearTimeout(timer);
      timer = undefined;
      held.clear();
    },
  };
}
