/**
 * Queue depth by state and connected workers, read from Redis at scrape time: one Redis round per
 * queue per scrape (cached for a second), shared by both gauges and by the "redis" dependency check.
 */
import type { JobType } from 'bullmq';
import { Gauge, type Registry } from 'prom-client';
import { withTimeout } from '../timeout.js';

/** The queue states exported as `oddsfiles_queue_jobs{state}` (BullMQ's getJobCounts names). */
export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'paused', 'failed', 'completed'] as const;

/** What bindQueue needs of a BullMQ Queue (any Queue fits). */
export interface QueueSource {
  readonly name: string;
  getJobCounts(...types: JobType[]): Promise<Record<string, number>>;
  getWorkersCount?(): Promise<number>;
}

export interface QueueMetrics {
  /** Report this queue at every scrape. */
  bind(queue: QueueSource): void;
  /** Rejects when the counts of some bound queue cannot be read (the "redis" dependency check). */
  countsAvailable(): Promise<void>;
}

interface QueueScrape {
  readonly counts: Record<string, number> | undefined;
  readonly workers: number | undefined;
}

/** `timeoutMs`: longest a scrape waits for Redis. */
export function createQueueMetrics(registry: Registry, timeoutMs: number): QueueMetrics {
  const registers = [registry];
  const queues = new Map<string, QueueSource>();
  const scrapes = new Map<string, { at: number; result: Promise<QueueScrape> }>();
  const scrapeQueue = (queue: QueueSource): Promise<QueueScrape> => {
    const cached = scrapes.get(queue.name);
    if (cached && Date.now() - cached.at < 1000) return cached.result;
    const result = (async (): Promise<QueueScrape> => {
      const [counts, workers] = await Promise.allSettled([
        withTimeout(queue.getJobCounts(...(QUEUE_STATES as unknown as JobType[])), timeoutMs, 'queue counts'),
        queue.getWorkersCount ? withTimeout(queue.getWorkersCount(), timeoutMs, 'queue workers') : Promise.reject(new Error('n/a')),
      ]);
      return {
        counts: counts.status === 'fulfilled' ? counts.value : undefined,
        workers: workers.status === 'fulfilled' ? workers.value : undefined,
      };
    })();
    scrapes.set(queue.name, { at: Date.now(), result });
    return result;
  };

  new Gauge({
    name: 'oddsfiles_queue_jobs',
    help: 'Jobs in the queue by state, read from Redis at scrape time (the same in every process: use max()).',
    labelNames: ['queue', 'state'] as const,
    registers,
    async collect() {
      this.reset();
      await Promise.all(
        [...queues.values()].map(async (q) => {
          const { counts } = await scrapeQueue(q);
          // Unknown while Redis is away: no series rather than stale numbers (oddsfiles_dependency_up says why).
          if (!counts) return;
          for (const state of QUEUE_STATES) this.set({ queue: q.name, state }, counts[state] ?? 0);
        }),
      );
    },
  });
  new Gauge({
    name: 'oddsfiles_queue_workers',
    help: 'Workers connected to the queue (BullMQ connection names), at scrape time.',
    labelNames: ['queue'] as const,
    registers,
    async collect() {
      this.reset();
      await Promise.all(
        [...queues.values()].map(async (q) => {
          const { workers } = await scrapeQueue(q);
          if (workers !== undefined) this.set({ queue: q.name }, workers);
        }),
      );
    },
  });

  return {
    bind(queue) {
      queues.set(queue.name, queue);
    },
    async countsAvailable() {
      for (const q of queues.values()) if (!(await scrapeQueue(q)).counts) throw new Error('queue counts unavailable');
    },
  };
}
