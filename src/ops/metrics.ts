/**
 * Prometheus metrics (prom-client), one registry per process. Every name starts with `oddsfiles_`.
 * Counters and histograms are fed by the code that sees the event (the worker's
 * onSettled, the reader's hooks); queue depth, dependency health and feed freshness are computed
 * at scrape time from what the caller binds (a queue, probes, the in-memory catalog), so a scrape
 * always shows the present and nothing has to be kept up to date in the background.
 *
 * Metrics are per process: Prometheus scrapes every process (the reader on its port, a worker-only
 * process on METRICS_PORT, see metrics-server.ts) and sums counters across them. Queue depth and
 * freshness describe shared state, so every process that binds them reports the same values:
 * aggregate those with max(), not sum().
 *
 * Each group of metrics lives in its own module (ingest-, http-, change-, queue-, dependency-, freshness-,
 * loop-delay-metrics.ts); this one composes them on one registry.
 */
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { CatalogEntry } from '../catalog/types.js';
import { createChangeMetrics, type ChangeMetrics } from './change-metrics.js';
import { createDependencyMetrics } from './dependency-metrics.js';
import { createFreshnessMetrics, type BindCatalogOptions } from './freshness-metrics.js';
import { createHttpMetrics, type HttpMetrics } from './http-metrics.js';
import { createIngestMetrics, type IngestMetrics } from './ingest-metrics.js';
import { registerLoopDelayMetrics } from './loop-delay-metrics.js';
import { createQueueMetrics, type QueueSource } from './queue-metrics.js';

export type { SettledDrop, SettledJob } from './ingest-metrics.js';
export type { BindCatalogOptions } from './freshness-metrics.js';
export { QUEUE_STATES, type QueueSource } from './queue-metrics.js';

export const METRIC_PREFIX = 'oddsfiles_';

/** A sampling interval no process lives to see (about 24 days: the largest a timer takes). */
const NEVER_MS = 2 ** 31 - 1;

export interface MetricsOptions {
  /** Node.js process metrics (collectDefaultMetrics, prefixed oddsfiles_). Default true. */
  readonly defaultMetrics?: boolean;
  /**
   * How often the event-loop delay is sampled, ms (default 100). Each sample wakes the loop: every
   * 10 ms (prom-client's default) cost an idle process about 4 ms of CPU a second.
   */
  readonly loopSampleMs?: number;
  /** Labels added to every series, e.g. { role: 'worker' }. */
  readonly defaultLabels?: Readonly<Record<string, string>>;
  /** Longest a scrape waits for Redis or a probe before reporting it down. Default 2000 ms. */
  readonly scrapeTimeoutMs?: number;
  /** Clock for freshness (tests). */
  readonly now?: () => number;
}

export interface Metrics extends IngestMetrics, HttpMetrics, ChangeMetrics {
  readonly registry: Registry;
  /** Content-Type of render()'s output. */
  readonly contentType: string;
  /** Queue depth by state (and connected workers) from Redis at scrape time; also the "redis" dependency. */
  bindQueue(queue: QueueSource): void;
  /** Per-feed freshness from the caller's in-memory catalog, at scrape time. */
  bindCatalog(getEntries: () => Iterable<CatalogEntry>, options?: BindCatalogOptions): void;
  /** A dependency check run at scrape time: oddsfiles_dependency_up{dependency} is 1 when it resolves in time. */
  bindProbe(dependency: string, check: () => Promise<unknown>): void;
  /** The Prometheus text exposition of everything. */
  render(): Promise<string>;
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (options.defaultLabels) registry.setDefaultLabels({ ...options.defaultLabels });
  if (options.defaultMetrics ?? true) {
    // prom-client's event-loop gauges give way to ours; its sampler is left with a timer that never fires.
    collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX, eventLoopMonitoringPrecision: NEVER_MS });
    registerLoopDelayMetrics(registry, METRIC_PREFIX, options.loopSampleMs ?? 100);
  }
  const timeoutMs = options.scrapeTimeoutMs ?? 2000;

  const ingest = createIngestMetrics(registry);
  const http = createHttpMetrics(registry);
  const changes = createChangeMetrics(registry);
  const queues = createQueueMetrics(registry, timeoutMs);
  const dependencies = createDependencyMetrics(registry, timeoutMs);
  const freshness = createFreshnessMetrics(registry, options.now ?? Date.now);

  return {
    registry,
    contentType: registry.contentType,
    ...ingest,
    ...http,
    ...changes,
    bindQueue(queue) {
      queues.bind(queue);
      dependencies.bindIfAbsent('redis', () => queues.countsAvailable());
    },
    bindCatalog: (getEntries, opts) => freshness.bind(getEntries, opts),
    bindProbe: (dependency, check) => dependencies.bind(dependency, check),
    render: () => registry.metrics(),
  };
}
