/**
 * Whether a worker's validation thread finds a core free. The thread is worth its hop while it
 * runs beside the event loop on a core of its own; when the cores are full (two worker processes
 * on two cores, say), it waits for one as long as it runs, and each drop costs 10–20 % more CPU
 * than checked on the loop. The thread says, with each answer, how long the check took and how
 * much CPU it has used so far: over a window of its CPU time, wall time well past it means it
 * waited, and the drops are checked on the loop for a while before the thread is tried again.
 *
 * The wall time runs from the thread taking the check: a wait for a core before that is not
 * seen. One thread is judged (the default count); a window restarts when the thread is replaced.
 */

/** What the thread says with each answer. */
export interface ThreadTiming {
  /** The check's wall time, ms, from the thread taking it to its answer. */
  readonly wallMs: number;
  /** The thread's CPU time so far, ms; undefined where the runtime cannot tell (Node before 22.15). */
  readonly cpuMs: number | undefined;
  /** Which thread answered (worker_threads' threadId). */
  readonly threadId: number;
}

export interface ContentionOptions {
  /**
   * The thread's CPU time a window spans, ms: its CPU clock moves in steps of up to a scheduler
   * tick (10 ms at HZ=100), so a window holds many.
   */
  readonly windowCpuMs?: number;
  /** Wall over CPU time from which the thread counts as waiting for a core. */
  readonly busyRatio?: number;
  /** How long drops are checked on the loop before the thread is tried again, ms. */
  readonly loopForMs?: number;
  /** A monotonic clock, ms. */
  readonly now?: () => number;
}

export interface CoreContention {
  /** Whether the next check goes to the thread. */
  useThread(): boolean;
  /** A check's timing; true when it turns the checks to the loop. */
  observe(t: ThreadTiming): boolean;
}

export const CONTENTION_DEFAULTS = { windowCpuMs: 100, busyRatio: 1.5, loopForMs: 30_000 } as const;

export function createCoreContention(opts: ContentionOptions = {}): CoreContention {
  const windowCpuMs = opts.windowCpuMs ?? CONTENTION_DEFAULTS.windowCpuMs;
  const busyRatio = opts.busyRatio ?? CONTENTION_DEFAULTS.busyRatio;
  const loopForMs = opts.loopForMs ?? CONTENTION_DEFAULTS.loopForMs;
  const now = opts.now ?? (() => performance.now());
  let loopUntil = -Infinity;
  // The window: its thread, that thread's CPU at its start (after a check), and the wall time of the checks since.
  let thread: number | undefined;
  let startCpu: number | undefined;
  let wallMs = 0;
  const restart = (threadId: number | undefined, cpu: number | undefined) => {
    thread = threadId;
    startCpu = cpu;
    wallMs = 0;
  };
  return {
    useThread: () => now() >= loopUntil,
    observe({ wallMs: wall, cpuMs, threadId }) {
      // Checks still on the thread when it turned to the loop start no window.
      if (cpuMs === undefined || now() < loopUntil) return false;
      if (startCpu === undefined || threadId !== thread) {
        restart(threadId, cpuMs);
        return false;
      }
      wallMs += wall;
      const cpu = cpuMs - startCpu;
      if (cpu <= 0 || cpu < windowCpuMs) return false;
      const ratio = wallMs / cpu;
      restart(threadId, cpuMs);
      if (!(ratio >= busyRatio)) return false;
      loopUntil = now() + loopForMs;
      restart(undefined, undefined);
      return true;
    },
  };
}
