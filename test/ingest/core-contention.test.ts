/**
 * When a worker's validation thread counts as waiting for a core (src/ingest/publish/core-contention.ts):
 * over a window of the thread's CPU time, the checks' wall time against it. Past the ratio the
 * checks go to the loop for a while, then to the thread again, which must fill a whole new window
 * before it can be judged again; a thread replaced starts a new window; a runtime that cannot tell
 * the thread's CPU keeps the thread.
 */
import { describe, expect, it } from 'vitest';
import { createCoreContention, type CoreContention } from '../../src/ingest/publish/core-contention.js';

/** `n` checks of `wallMs` each, the thread's CPU growing by `cpuMs` each, from `cpu0`; the turns seen. */
function run(c: CoreContention, n: number, wallMs: number, cpuMs: number, cpu0 = 0, threadId = 1): { turns: number; cpu: number } {
  let cpu = cpu0;
  let turns = 0;
  for (let i = 0; i < n; i++) {
    cpu += cpuMs;
    if (c.observe({ wallMs, cpuMs: cpu, threadId })) turns++;
  }
  return { turns, cpu };
}

describe('core contention of a validation thread', () => {
  it('keeps the thread while its checks take about their CPU time', () => {
    const c = createCoreContention({ windowCpuMs: 8, busyRatio: 1.5, loopForMs: 1000, now: () => 0 });
    expect(run(c, 100, 1.3, 1.0).turns).toBe(0);
    expect(c.useThread()).toBe(true);
  });

  it('turns to the loop once a window waited for a core, and back to the thread after a while', () => {
    let now = 0;
    const c = createCoreContention({ windowCpuMs: 8, busyRatio: 1.5, loopForMs: 1000, now: () => now });
    // The first check only opens the window; eight more at twice their CPU fill it.
    let { turns, cpu } = run(c, 8, 2, 1);
    expect(turns).toBe(0);
    ({ turns, cpu } = run(c, 1, 2, 1, cpu));
    expect(turns).toBe(1);
    expect(c.useThread()).toBe(false);
    // Checks still on the thread when it turned are not counted.
    ({ turns, cpu } = run(c, 20, 2, 1, cpu));
    expect(turns).toBe(0);
    now = 999;
    expect(c.useThread()).toBe(false);
    now = 1000;
    expect(c.useThread()).toBe(true);
    // A whole new window before it can turn again.
    ({ turns, cpu } = run(c, 8, 2, 1, cpu));
    expect(turns).toBe(0);
    expect(run(c, 1, 2, 1, cpu).turns).toBe(1);
  });

  it('judges a window only once the thread has used CPU time', () => {
    const c = createCoreContention({ windowCpuMs: 0, busyRatio: 1.5, now: () => 0 });
    // Its CPU clock did not move: no ratio (not an infinite one).
    expect(run(c, 50, 5, 0, 10).turns).toBe(0);
    expect(c.useThread()).toBe(true);
  });

  it('starts a new window when the thread is replaced', () => {
    const c = createCoreContention({ windowCpuMs: 8, busyRatio: 1.5, now: () => 0 });
    // Thread 1's window: from 100 ms of its CPU, four checks of 1 ms each, not yet full.
    run(c, 5, 1, 1, 99, 1);
    // A new thread's clock counts from its own start: 108 ms is not 8 ms of thread 1's window,
    // and its long check does not make that window look like waiting.
    expect(c.observe({ wallMs: 20, cpuMs: 108, threadId: 2 })).toBe(false);
    expect(run(c, 8, 1, 1, 108, 2).turns).toBe(0);
    expect(c.useThread()).toBe(true);
  });

  it('keeps the thread where the runtime cannot tell its CPU time', () => {
    const c = createCoreContention({ windowCpuMs: 2, busyRatio: 1.5, now: () => 0 });
    for (let i = 0; i < 10; i++) expect(c.observe({ wallMs: 50, cpuMs: undefined, threadId: 1 })).toBe(false);
    expect(c.useThread()).toBe(true);
  });
});
