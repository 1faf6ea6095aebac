/**
 * The stop of a service: the steps added while starting run in reverse order, each waited for
 * until a deadline (ingest.shutdown_timeout plus STOP_GRACE_MS); past it, each step still running
 * or still to run gets LATE_STEP_MS more at most.
 *
 * With Redis away, what waits for it (the watcher's adds, BullMQ's closes: they wait for the
 * connection to be ready) would hold the stop until Redis came back. At the deadline the
 * connections that are not ready are dropped. Nothing is lost: a drop not queued stays in the
 * inbox and a claim in .processing, for the next start.
 */
import type { Redis } from 'ioredis';
import type { Logger } from './log.js';

/** The worker role's own forced close and manifest flush run at the timeout: they get the grace. */
const STOP_GRACE_MS = 3000;
const LATE_STEP_MS = 1000;

export interface StopSequence {
  /** A step of the stop (run after every step added later). */
  add(step: () => Promise<unknown>): void;
  /** A Redis connection of the process, dropped at the deadline if not ready. */
  watch(connection: Redis): void;
  /** True once `stop` was called. */
  readonly stopping: boolean;
  /** `redisGone`: Redis is known not to answer (a start that could not reach it): its connections are dropped first, not at the deadline. */
  stop(opts?: { redisGone?: boolean }): Promise<void>;
}

export function createStopSequence(log: Logger, shutdownTimeoutMs: number): StopSequence {
  const steps: (() => Promise<unknown>)[] = [];
  const connections = new Set<Redis>();
  let stopping = false;

  const dropStuckConnections = () => {
    const stuck = [...connections].filter((c) => c.status !== 'ready' && c.status !== 'end');
    if (stuck.length === 0) return;
    log.warn(
      { connections: stuck.length },
      'stopping: Redis does not answer; dropping its connections (drops not queued stay in the inbox, claims in .processing)',
    );
    for (const c of stuck) c.disconnect();
  };

  return {
    add: (step) => steps.push(step),
    watch: (connection) => connections.add(connection),
    get stopping() {
      return stopping;
    },
    async stop(opts = {}) {
      stopping = true;
      if (opts.redisGone) dropStuckConnections();
      let late: (() => void) | undefined;
      const lateSignal = new Promise<void>((resolve) => (late = resolve));
      const deadline = setTimeout(() => {
        dropStuckConnections();
        late!();
      }, shutdownTimeoutMs + STOP_GRACE_MS);
      deadline.unref();
      const oneMore = () => new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), LATE_STEP_MS).unref());
      try {
        for (const fn of steps.reverse()) {
          const step = fn().catch((err: unknown) => log.warn({ err: { message: (err as Error).message } }, 'error while stopping'));
          // Unbounded until the deadline; from then on (or at once, past it), LATE_STEP_MS for this step.
          const limit = lateSignal.then(oneMore);
          if ((await Promise.race([step, limit])) === 'late')
            log.warn({ afterMs: LATE_STEP_MS }, 'stopping: a step did not finish in time; going on without it');
        }
      } finally {
        clearTimeout(deadline);
      }
    },
  };
}
