/** The ingest metrics, fed by the worker as it settles each drop: outcomes, rejection reasons, job duration, publish lag. */
import { Counter, Histogram, type Registry } from 'prom-client';
import type { DropOutcome } from '../catalog/types.js';
import { REJECTION_REASONS } from '../errors.js';
import { feedKindOf } from '../feeds/kind.js';
import { safeLabel } from './metric-label.js';

const DROP_OUTCOMES: readonly DropOutcome[] = ['published', 'superseded', 'unchanged', 'rejected'];

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

export interface IngestMetrics {
  /** One settled drop: outcome counter, rejection reason, job duration, and (published) the drop→publish lag. */
  dropSettled(result: SettledDrop, lagMs: number, durationMs: number): void;
  /** dropSettled with the lag and duration taken from the job (what the worker's onSettled has); `timings.total`: the publish step's own duration. */
  jobSettled(result: SettledDrop & { readonly timings: Readonly<Record<string, number>> }, job: SettledJob): void;
  /** One drop's document check, on a validation thread or on the event loop. */
  dropChecked(on: 'thread' | 'loop'): void;
}

export function createIngestMetrics(registry: Registry): IngestMetrics {
  const registers = [registry];
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
  const checks = new Counter({
    name: 'oddsfiles_drop_checks_total',
    help: "Drops' document checks by where they ran: on a validation thread or on the event loop.",
    labelNames: ['on'] as const,
    registers,
  });
  // Every known label value starts at 0, so rate() and increase() work from the first scrape.
  for (const on of ['thread', 'loop'] as const) checks.inc({ on }, 0);
  for (const o of DROP_OUTCOMES) drops.inc({ outcome: o }, 0);
  for (const r of REJECTION_REASONS) rejections.inc({ reason: r }, 0);

  const dropSettled: IngestMetrics['dropSettled'] = (result, lagMs, durationMs) => {
    drops.inc({ outcome: result.outcome });
    if (result.outcome === 'rejected') rejections.inc({ reason: safeLabel(result.reason ?? 'unknown') });
    if (Number.isFinite(durationMs)) jobDuration.observe({ outcome: result.outcome }, Math.max(0, durationMs) / 1000);
    if (result.outcome === 'published' && Number.isFinite(lagMs))
      publishLag.observe({ kind: feedKindOf(result.filename) ?? 'unknown' }, Math.max(0, lagMs) / 1000);
  };
  return {
    dropSettled,
    dropChecked: (on) => checks.inc({ on }),
    jobSettled(result, job) {
      const t = Date.now();
      const durationMs = result.timings.total ?? (job.processedOn ? t - job.processedOn : Number.NaN);
      dropSettled(result, t - job.data.receivedAt, durationMs);
    },
  };
}
