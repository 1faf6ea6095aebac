/**
 * Whether a worker's validation thread finds a core free. The thread is worth its hop while it
 * runs beside the event loop on a core of its own; when the cores are full (two worker processes
 * on two cores, say), it waits for one as long as it runs, and each drop costs 10–20 % more CPU
 * than checked on the loop. The thread says, with each answer, how long the check took and how
 * much CPU it has used so far: over a window of checks, wall time well past CPU time means it
 * waited, and the drops are checked on the loop for a while before the thread is tried again.
 */

/** What the thread says with each answer. */
export interface ThreadTiming {
  /** The check's wall time, ms, from the thread taking it to its answer. */
  readonly wallMs: number;
  /** The thread's CPU time so far, ms; undefined where the runtime cannot tell (Node before 22.15). */
  readonly cpuMs: number | undefined;
}

export interface ContentionOptions {
  /** Checks per window. */
  readonly windowChecks?: number;
  /** Wall over CPU time from which the thread counts as waiting for a core. */
  readonly busyRatio?: number;
  /** How long drops are checked on the loop before the thread is tried again, ms. */
  readonly loopForMs?: number;
  readonly now?: () => number;
}

export interface CoreContention {
  /** Whether the next check goes to the thread. */
  useThread(): boolean;
  /** A check's timing; true when it turns the checks to the loop. */
  observe(t: ThreadTiming): boolean;
}

export const CONTENTION_DEFAULTS = { windowChecks: 64, busyRatio: 1.5, loopForMs: 30_000 } as const;

export function createCoreContention(opts: ContentionOptions = {}): CoreContention {
  const windowChecks = opts.windowChecks ?? CONTENTION_DEFAULTS.windowChecks;
  const busyRatio = opts.busyRatio ?? CONTENTION_DEFAULTS.busyRatio;
  const loopForMs = opts.loopForMs ?? CONTENTION_DEFAULTS.loopForMs;
  const now = opts.now ?? Date.now;
  let loopUntil = 0;
  // The window: the thread's CPU at its start (after a check), and the wall time of the checks since.
  let startCpu: number | undefined;
  let wallMs = 0;
  let checks = 0;
  const restart = (cpu: number | undefined) => {
    startCpu = cpu;
    wallMs = 0;
    checks = 0;
  };
  return {
    useThread: () => now() >= loopUntil,
    observe({ wallMs: wall, cpuMs }) {
      // Checks still on the thread when it turned to the loop start no window.
      if (cpuMs === undefined || now() < loopUntil) return false;
      if (startCpu === undefined || cpuMs < startCpu) {
        restart(cpuMs);
        return false;
      }
      wallMs += wall;
      if (++checks < windowChecks) return false;
      const ratio = wallMs / (cpuMs - startCpu);
      restart(cpuMs);
      if (!(ratio >= busyRatio)) return false;
      loopUntil = now() + loopForMs;
      restart(undefined);
      return true;
    },
  };
}
