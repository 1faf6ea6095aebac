// Loaded with `node --import` into a bench's oddsfiles processes: the event-loop delay
// (perf_hooks.monitorEventLoopDelay, 1 ms resolution) since the last SIGUSR2, written to
// $LOOP_PROBE_DIR/loop-<pid>.json on each SIGUSR2, then reset; with the time of the signal on the
// clock of V8's CPU profiles (monotonic, µs), so that a profile can be cut to the span between two;
// and process.memoryUsage() at that moment (what the heap, Buffers and the rest of RSS hold), and
// the garbage collector's pauses meanwhile (count, total and longest ms, and how many were major).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { constants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';

const dir = process.env.LOOP_PROBE_DIR;
if (dir) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  let gc = { count: 0, totalMs: 0, maxMs: 0, major: 0 };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gc.count++;
      gc.totalMs += e.duration;
      gc.maxMs = Math.max(gc.maxMs, e.duration);
      if (e.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) gc.major++;
    }
  }).observe({ entryTypes: ['gc'] });
  let n = 0;
  process.on('SIGUSR2', () => {
    const ms = (ns) => ns / 1e6;
    const out = {
      n: n++,
      p50: ms(h.percentile(50)),
      p99: ms(h.percentile(99)),
      max: ms(h.max),
      count: h.count,
      mem: process.memoryUsage(),
      gc,
      atUs: Number(process.hrtime.bigint() / 1000n),
    };
    writeFileSync(join(dir, `loop-${process.pid}.json`), JSON.stringify(out));
    h.reset();
    gc = { count: 0, totalMs: 0, maxMs: 0, major: 0 };
  });
}
