/** A conflated stream's window: a change after a quiet window goes at once, later ones wait for the window's end and leave in one write. */
import { describe, expect, it } from 'vitest';
import { createConflation } from '../../src/reader/changes/conflate.js';
import { createWindowTimers } from '../../src/reader/changes/window-timers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A stream at `cursor` whose allowed positions are `allowed` (all when undefined). */
function stream(windowMs: number, allowed?: (seq: number) => boolean) {
  const timers = createWindowTimers();
  const s = { cursor: 0, latest: 0, writes: [] as [number, number][], paused: false };
  const c = createConflation({
    windowMs,
    timers,
    emit: (to) => {
      const from = s.cursor + 1;
      s.cursor = to;
      const any = Array.from({ length: to - from + 1 }, (_, i) => from + i).some((p) => allowed?.(p) ?? true);
      if (any) s.writes.push([from, to]);
      return any;
    },
    latest: () => s.latest,
    pause: () => (s.paused = true),
    resume: () => (s.paused = false),
  });
  const change = () => {
    s.latest++;
    if (!s.paused) c.changed(s.latest);
  };
  return { s, c, change, timers };
}

describe('conflation window', () => {
  it('writes the first change at once, holds the next ones until the window ends, then writes them as one', async () => {
    const { s, c, change, timers } = stream(150);
    change();
    expect(s.writes).toEqual([[1, 1]]);
    change();
    change();
    change();
    // Waiting: the broadcast leaves it out until the end.
    expect(s.paused).toBe(true);
    expect(s.writes).toEqual([[1, 1]]);
    await sleep(300);
    expect(s.writes).toEqual([
      [1, 1],
      [2, 4],
    ]);
    expect(s.paused).toBe(false);
    c.stop();
    timers.clear();
  });

  it('a change the stream may not read starts no window: the next allowed change goes at once', async () => {
    const { s, c, change, timers } = stream(10_000, (p) => p !== 1);
    change();
    expect(s.writes).toEqual([]);
    expect(s.paused).toBe(false);
    change();
    expect(s.writes).toEqual([[2, 2]]);
    change();
    expect(s.paused).toBe(true);
    c.stop();
    timers.clear();
  });

  it('a stopped stream writes nothing at its window end', async () => {
    const { s, c, change, timers } = stream(50);
    change();
    change();
    c.stop();
    await sleep(150);
    expect(s.writes).toEqual([[1, 1]]);
    timers.clear();
  });
});
