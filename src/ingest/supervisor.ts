/**
 * Keeps a BullMQ worker consuming. After a long Redis outage a worker can stay "running" while
 * its blocking connection never comes back (bullmq#4585): jobs wait, none start. The supervisor
 * notices (jobs waiting, free capacity here, nothing started for a while) and replaces the worker.
 *
 * Jobs in flight are tracked by id, not by a counter: a job whose completion could not be recorded
 * (Redis away at that moment) emits neither 'completed' nor 'failed', and a counter would then
 * stay high for ever and switch the supervision off, exactly after an outage. Ids that Redis no
 * longer has as active are dropped at each check.
 */
import type { Worker } from 'bullmq';
import type { Logger } from '../log.js';
import type { IngestJobData, IngestQueue, IngestResult } from './queue.js';

export interface SupervisorOptions {
  readonly create: () => Worker<IngestJobData, IngestResult>;
  readonly queue: IngestQueue;
  readonly concurrency: number;
  readonly log: Logger;
  /** How long jobs may wait with nothing starting before the worker is replaced. */
  readonly stuckAfterMs?: number;
  readonly checkEveryMs?: number;
}

export interface SupervisedWorker {
  /** The worker in service now. */
  current(): Worker<IngestJobData, IngestResult>;
  readonly restarts: number;
  close(force?: boolean): Promise<void>;
}

export async function superviseWorker(opts: SupervisorOptions): Promise<SupervisedWorker> {
  const stuckAfterMs = opts.stuckAfterMs ?? 20_000;
  let worker: Worker<IngestJobData, IngestResult>;
  /** Jobs this worker took and has not finished, by id. */
  const active = new Set<string>();
  let lastProgress = Date.now();
  let restarts = 0;
  let closing = false;
  let checking = false;
  /** When jobs were first seen waiting with nothing started for stuckAfterMs (undefined: not suspect). */
  let suspectSince: number | undefined;

  const start = async () => {
    active.clear();
    lastProgress = Date.now();
    suspectSince = undefined;
    const w = opts.create();
    worker = w;
    const progress = () => {
      lastProgress = Date.now();
      suspectSince = undefined;
    };
    // Events of a replaced worker (still finishing) no longer count.
    w.on('active', (job) => {
      if (w !== worker) return;
      if (job.id) active.add(job.id);
      progress();
    });
    const done = (job: { id?: string } | undefined) => {
      if (w !== worker) return;
      if (job?.id) active.delete(job.id);
      progress();
    };
    w.on('completed', done);
    w.on('failed', done);
    await w.waitUntilReady();
  };

  /** Forget jobs Redis no longer has as active (their end was never reported here). */
  const prune = async () => {
    for (const id of [...active]) {
      if ((await opts.queue.getJobState(id)) !== 'active') active.delete(id);
    }
  };
  await start();

  const timer = setInterval(() => {
    if (closing || checking) return;
    checking = true;
    void (async () => {
      try {
        if (Date.now() - lastProgress < stuckAfterMs) return;
        if (active.size >= opts.concurrency) await prune();
        if (active.size >= opts.concurrency) return;
        const waiting = await opts.queue.getWaitingCount();
        if (waiting === 0) {
          lastProgress = Date.now();
          suspectSince = undefined;
          return;
        }
        // Jobs that arrived a moment ago after a long idle spell are not a stuck worker: replace
        // it only if the next check still finds jobs waiting and nothing started in between.
        if (suspectSince === undefined) {
          suspectSince = Date.now();
          return;
        }
        opts.log.warn({ waiting, idleMs: Date.now() - lastProgress }, 'worker is not taking jobs while jobs wait; replacing it');
        const old = worker;
        await old.close(true).catch(() => undefined);
        if (closing) return;
        restarts++;
        await start();
      } catch (err) {
        // Redis still away: try again at the next tick.
        opts.log.debug({ err: { message: (err as Error).message } }, 'supervisor check failed');
      } finally {
        checking = false;
      }
    })();
  }, opts.checkEveryMs ?? 5000);
  timer.unref();

  return {
    current: () => worker,
    get restarts() {
      return restarts;
    },
    async close(force = false) {
      closing = true;
      clearInterval(timer);
      await worker.close(force);
    },
  };
}
