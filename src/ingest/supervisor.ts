/**
 * Keeps a BullMQ worker consuming. After a long Redis outage a worker can stay "running" while
 * its blocking connection never comes back (bullmq#4585): jobs wait, none start. The supervisor
 * notices (jobs waiting, free capacity here, nothing started for a while) and replaces the worker.
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
  let active = 0;
  let lastProgress = Date.now();
  let restarts = 0;
  let closing = false;
  let checking = false;

  const start = async () => {
    active = 0;
    lastProgress = Date.now();
    worker = opts.create();
    worker.on('active', () => {
      active++;
      lastProgress = Date.now();
    });
    const done = () => {
      active = Math.max(0, active - 1);
      lastProgress = Date.now();
    };
    worker.on('completed', done);
    worker.on('failed', done);
    await worker.waitUntilReady();
  };
  await start();

  const timer = setInterval(() => {
    if (closing || checking) return;
    checking = true;
    void (async () => {
      try {
        if (active >= opts.concurrency || Date.now() - lastProgress < stuckAfterMs) return;
        const waiting = await opts.queue.getWaitingCount();
        if (waiting === 0) {
          lastProgress = Date.now();
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
