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
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { JobType } from 'bullmq';
import type { CatalogEntry, CommitOutcome } from '../catalog/types.js';
import type { FeedKind } from '../config.js';
import { REJECTION_REASONS } from '../errors.js';
import { FEED_KINDS, feedKindOf } from '../feeds/kind.js';
import { withTimeout } from '../timeout.js';

export const METRIC_PREFIX = 'oddsfiles_';

/** The queue states exported as `oddsfiles_queue_jobs{state}` (BullMQ's getJobCounts names). */
export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'paused', 'failed', 'completed'] as const;

/** How a drop was settled: its commit's outcome, or rejected. */
export type DropOutcome = CommitOutcome | 'rejected';

const DROP_OUTCOMES: readonly DropOutcome[] = ['published', 'superseded', 'unchanged', 'rejected'];
const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** What bindQueue needs of a BullMQ Queue (any Queue fits). */
export interface QueueSource {
  readonly name: string;
  getJobCounts(...types: JobType[]): Promise<Record<string, number>>;
  getWorkersCount?(): Promise<number>;
}

export interface MetricsOptions {
  /** Node.js process metrics (collectDefaultMetrics, prefixed oddsfiles_). Default true. */
  readonly defaultMetrics?: boolean;
  /** Labels added to every series, e.g. { role: 'worker' }. */
  readonly defaultLabels?: Readonly<Record<string, string>>;
  /** Longest a scrape waits for Redis or a probe before reporting it down. Default 2000 ms. */
  readonly scrapeTimeoutMs?: number;
  /** Clock for freshness (tests). */
  readonly now?: () => number;
}

export interface BindCatalogOptions {
  /** config.staleAfterMs: exported as oddsfiles_feed_stale_after_seconds{kind} and used for oddsfiles_feeds_stale. */
  readonly staleAfterMs?: Readonly<Record<FeedKind, number>>;
}

/** One settled drop, as the worker reports it. */
export interface SettledDrop {
  readonly outcome: DropOutcome;
  readonly filename: string;
  /** A rejection's reason. */
  readonly reason?: string | undefined;
}

/** The timing facts of a settled BullMQ job (a Job fits). */
export interface SettledJob {
  readonly data: { readonly receivedAt: number };
  readonly processedOn?: number | undefined;
}

export interface Metrics {
  readonly registry: Registry;
  /** Content-Type of render()'s output. */
  readonly contentType: string;
  /** One settled drop: outcome counter, rejection reason, job duration, and (published) the drop→publish lag. */
  dropSettled(result: SettledDrop, lagMs: number, durationMs: number): void;
  /** dropSettled with the lag and duration taken from the job (what the worker's onSettled has); `timings.total`: the publish step's own duration. */
  jobSettled(result: SettledDrop & { readonly timings: Readonly<Record<string, number>> }, job: SettledJob): void;
  /** One HTTP response. `route` is the route pattern (never the raw URL): label cardinality stays bounded. */
  httpResponse(route: string, method: string, status: number, durationMs?: number): void;
  /** A request refused for its rate (scope: e.g. "key", "auth_failures"). */
  rateLimited(scope: string): void;
  /** A failed authentication (reason: e.g. "missing", "unknown", "revoked", "marketplace_secret", "admin_token"). */
  authFailed(reason: string): void;
  /** Queue depth by state (and connected workers) from Redis at scrape time; also the "redis" dependency. */
  bindQueue(queue: QueueSource): void;
  /** Per-feed freshness from the caller's in-memory catalog, at scrape time. */
  bindCatalog(getEntries: () => Iterable<CatalogEntry>, options?: BindCatalogOptions): void;
  /** A dependency check run at scrape time: oddsfiles_dependency_up{dependency} is 1 when it resolves in time. */
  bindProbe(dependency: string, check: () => Promise<unknown>): void;
  /** The Prometheus text exposition of everything. */
  render(): Promise<string>;
}

const LABEL_VALUE = /^[A-Za-z0-9_.:-]{1,40}$/;

/** Caller-supplied label values (scope, reason) are bounded: anything odd becomes "other". */
function safeLabel(value: string): string {
  return LABEL_VALUE.test(value) ? value : 'other';
}

interface QueueScrape {
  readonly counts: Record<string, number> | undefined;
  readonly workers: number | undefined;
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (options.defaultLabels) registry.setDefaultLabels({ ...options.defaultLabels });
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });
  const timeoutMs = options.scrapeTimeoutMs ?? 2000;
  const now = options.now ?? Date.now;
  const registers = [registry];

  // --- ingest (fed by the worker) ---
  const drops = new Counter({
    name: 'oddsfiles_drops_total',
    help: 'Settled drops by outcome (published, superseded, unchanged, rejected).',
    labelNames: ['outcome'] as const,
    registers,
  });
  const rejections = new Counter({
    name: 'oddsfiles_rejections_total',
    help: 'Rejected drops by reason (the reason codes of reason.json).',
    labelNames: ['reason'] as const,
    registers,
  });
  const jobDuration = new Histogram({
    name: 'oddsfiles_job_duration_seconds',
    help: 'Time a worker spent on one drop (read, validate, store, commit, manifest), by outcome.',
    labelNames: ['outcome'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers,
  });
  const publishLag = new Histogram({
    name: 'oddsfiles_publish_lag_seconds',
    help: 'From the drop being seen in the inbox to its version being published, by feed kind.',
    labelNames: ['kind'] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
    registers,
  });
  // Every known label value starts at 0, so rate() and increase() work from the first scrape.
  for (const o of DROP_OUTCOMES) drops.inc({ outcome: o }, 0);
  for (const r of REJECTION_REASONS) rejections.inc({ reason: r }, 0);

  // --- HTTP (fed by the reader's hooks) ---
  const httpRequests = new Counter({
    name: 'oddsfiles_http_requests_total',
    help: 'HTTP responses by route pattern, method and status.',
    labelNames: ['route', 'method', 'status'] as const,
    registers,
  });
  const httpDuration = new Histogram({
    name: 'oddsfiles_http_request_duration_seconds',
    help: 'HTTP response time by route pattern and method.',
    labelNames: ['route', 'method'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers,
  });
  const rateLimitedCounter = new Counter({
    name: 'oddsfiles_rate_limited_total',
    help: 'Requests refused with 429, by limit scope.',
    labelNames: ['scope'] as const,
    registers,
  });
  const authFailures = new Counter({
    name: 'oddsfiles_auth_failures_total',
    help: 'Failed authentications (API keys, marketplace secrets, the admin token), by reason.',
    labelNames: ['reason'] as const,
    registers,
  });

  // --- scrape time: the queue ---
  const queues = new Map<string, QueueSource>();
  const scrapes = new Map<string, { at: number; result: Promise<QueueScrape> }>();
  /** One Redis round per queue per scrape, shared by the gauges that need it. */
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

  // --- scrape time: dependencies ---
  const probes = new Map<string, () => Promise<unknown>>();
  new Gauge({
    name: 'oddsfiles_dependency_up',
    help: 'Whether a dependency (redis, store) answered at scrape time: 1 up, 0 down.',
    labelNames: ['dependency'] as const,
    registers,
    async collect() {
      this.reset();
      await Promise.all(
        [...probes.entries()].map(async ([dependency, check]) => {
          const ok = await withTimeout(Promise.resolve().then(check), timeoutMs, dependency).then(
            () => 1,
            () => 0,
          );
          this.set({ dependency }, ok);
        }),
      );
    },
  });

  // --- scrape time: feed freshness ---
  let catalogSource: (() => Iterable<CatalogEntry>) | undefined;
  let staleAfterMs: Readonly<Record<FeedKind, number>> | undefined;
  const entries = (): CatalogEntry[] => (catalogSource ? [...catalogSource()] : []);
  new Gauge({
    name: 'oddsfiles_feed_age_seconds',
    help: "Seconds since the published version's generated_at, per feed.",
    labelNames: ['filename', 'bookmaker', 'kind'] as const,
    registers,
    collect() {
      this.reset();
      const t = now();
      for (const e of entries()) this.set({ filename: e.filename, bookmaker: e.bookmaker, kind: e.kind }, (t - e.generatedAtMs) / 1000);
    },
  });
  new Gauge({
    name: 'oddsfiles_feed_published_age_seconds',
    help: 'Seconds since the current version was published, per feed.',
    labelNames: ['filename', 'bookmaker', 'kind'] as const,
    registers,
    collect() {
      this.reset();
      const t = now();
      for (const e of entries()) {
        const published = Date.parse(e.publishedAt);
        if (Number.isFinite(published)) this.set({ filename: e.filename, bookmaker: e.bookmaker, kind: e.kind }, (t - published) / 1000);
      }
    },
  });
  new Gauge({
    name: 'oddsfiles_feed_stale_after_seconds',
    help: 'The stale_after threshold per feed kind (config): a feed older than this is stale.',
    labelNames: ['kind'] as const,
    registers,
    collect() {
      this.reset();
      if (!staleAfterMs) return;
      for (const k of FEED_KINDS) this.set({ kind: k }, staleAfterMs[k] / 1000);
    },
  });
  new Gauge({
    name: 'oddsfiles_feeds_published',
    help: 'Feeds published, by kind (from the in-memory catalog).',
    labelNames: ['kind'] as const,
    registers,
    collect() {
      this.reset();
      if (!catalogSource) return;
      const n: Record<string, number> = { live: 0, pregame: 0, livepre: 0 };
      for (const e of entries()) n[e.kind] = (n[e.kind] ?? 0) + 1;
      for (const [kind, v] of Object.entries(n)) this.set({ kind }, v);
    },
  });
  new Gauge({
    name: 'oddsfiles_feeds_stale',
    help: 'Feeds whose generated_at is older than stale_after for their kind, by kind.',
    labelNames: ['kind'] as const,
    registers,
    collect() {
      this.reset();
      if (!catalogSource || !staleAfterMs) return;
      const t = now();
      const n: Record<string, number> = { live: 0, pregame: 0, livepre: 0 };
      for (const e of entries()) if (t - e.generatedAtMs > staleAfterMs[e.kind]) n[e.kind] = (n[e.kind] ?? 0) + 1;
      for (const [kind, v] of Object.entries(n)) this.set({ kind }, v);
    },
  });

  const metrics: Metrics = {
    registry,
    contentType: registry.contentType,
    dropSettled(result, lagMs, durationMs) {
      drops.inc({ outcome: result.outcome });
      if (result.outcome === 'rejected') rejections.inc({ reason: safeLabel(result.reason ?? 'unknown') });
      if (Number.isFinite(durationMs)) jobDuration.observe({ outcome: result.outcome }, Math.max(0, durationMs) / 1000);
      if (result.outcome === 'published' && Number.isFinite(lagMs))
        publishLag.observe({ kind: feedKindOf(result.filename) ?? 'unknown' }, Math.max(0, lagMs) / 1000);
    },
    jobSettled(result, job) {
      const t = Date.now();
      const durationMs = result.timings.total ?? (job.processedOn ? t - job.processedOn : Number.NaN);
      metrics.dropSettled(result, t - job.data.receivedAt, durationMs);
    },
    httpResponse(route, method, status, durationMs) {
      const m = HTTP_METHODS.has(method) ? method : 'OTHER';
      httpRequests.inc({ route, method: m, status: String(status) });
      if (durationMs !== undefined && Number.isFinite(durationMs)) httpDuration.observe({ route, method: m }, Math.max(0, durationMs) / 1000);
    },
    rateLimited(scope) {
      rateLimitedCounter.inc({ scope: safeLabel(scope) });
    },
    authFailed(reason) {
      authFailures.inc({ reason: safeLabel(reason) });
    },
    bindQueue(queue) {
      queues.set(queue.name, queue);
      if (!probes.has('redis')) {
        probes.set('redis', async () => {
          for (const q of queues.values()) if (!(await scrapeQueue(q)).counts) throw new Error('queue counts unavailable');
        });
      }
    },
    bindCatalog(getEntries, opts = {}) {
      catalogSource = getEntries;
      staleAfterMs = opts.staleAfterMs;
    },
    bindProbe(dependency, check) {
      probes.set(safeLabel(dependency), check);
    },
    render: () => registry.metrics(),
  };
  return metrics;
}
