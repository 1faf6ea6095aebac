/** One timer for many conflation windows: each end comes once, never before its time, in order of time (to 10 ms). */
import { describe, expect, it } from 'vitest';
import { createWindowTimers } from '../../src/reader/changes/window-timers.js';

describe('window timers', () => {
  it('tells each window its end once, not before it, earliest first', async () => {
    const timers = createWindowTimers();
    const now = Date.now();
    const told: { id: number; at: number; when: number }[] = [];
    const ends = [60, 5, 30, 30, 1, 45].map((ms, id) => ({ id, at: now + ms }));
    for (const e of ends) timers.at(e.at, { due: () => told.push({ ...e, when: Date.now() }) });
    await new Promise((r) => setTimeout(r, 200));
    expect(told.map((t) => t.id).sort()).toEqual([0, 1, 2, 3, 4, 5]);
    for (const t of told) expect(t.when).toBeGreaterThanOrEqual(t.at);
    // Ends within the same 10 ms come together.
    const order = told.map((t) => Math.ceil(t.at / 10));
    expect(order).toEqual([...order].sort((a, b) => a - b));
  });

  it('a window added while others wait, earlier than them, is told first; clear forgets all', async () => {
    const timers = createWindowTimers();
    const told: string[] = [];
    timers.at(Date.now() + 80, { due: () => told.push('late') });
    timers.at(Date.now() + 10, { due: () => told.push('early') });
    await new Promise((r) => setTimeout(r, 150));
    expect(told).toEqual(['early', 'late']);
    timers.at(Date.now() + 20, { due: () => told.push('cleared') });
    timers.clear();
    await new Promise((r) => setTimeout(r, 60));
    expect(told).toEqual(['early', 'late']);
  });
});
