/**
 * The ingest queue. Two kinds of job:
 * - drop {name}: "INBOX_DIR/<name> changed". Deduplicated by filename with keepLastIfActive, so a
 *   burst of rewrites of one filename never piles up jobs nor runs two versions at once.
 * - claim {name, claimId}: "process the already-claimed file .processing/<claimId>--<name>"
 *   (publish, rejected retry, recovery of claims whose job was lost). Job id `claim-<claimId>`.
 *   With `staged` the bytes are in the store instead, at incoming/<claimId>--<name> (a PUT of
 *   /v1/data: staged.ts); the worker brings them into its inbox as that claim first.
 */
import { Queue, type ConnectionOptions, type JobsOptions } from 'bullmq';
import { INGEST_QUEUE } from '../redis/key-names.js';

export interface IngestJobData {
  readonly name: string;
  /** When the drop was seen (ms since the epoch): the stamp for a missing generated_at. */
  readonly receivedAt: number;
  /** Set on claim jobs. */
  readonly claimId?: string;
  /** The claim's bytes are staged in the store (staged.ts), not in an inbox. */
  readonly staged?: boolean;
}

/** A completed job's return value: how its drop was settled (`gone`: there was nothing to settle). */
export interface IngestResult {
  /** published, superseded, unchanged, rejected, or gone. */
  readonly outcome: string;
  readonly filename: string;
  /** A rejection's reason code, detail and id (its folder in REJECTED_DIR). */
  readonly reason?: string;
  readonly detail?: string;
  readonly rejectionId?: string;
  /** The drop's SHA-256 and generated_at as published (set when it validated). */
  readonly sha256?: string;
  readonly generatedAt?: string;
  /** Superseded: the published generated_at that won over the drop. */
  readonly publishedGeneratedAt?: string;
  /** The version published under the filename once settled (the drop's, or the one that won). */
  readonly current?: { readonly sha256: string; readonly generatedAt: string };
}

export type IngestQueue = Queue<IngestJobData, IngestResult>;

/** Transient failures (store, Redis) are retried for a long time with a capped backoff. */
export const RETRY_ATTEMPTS = 10_000;
export const BACKOFF_TYPE = 'capped-exponential';

export function backoffDelay(attemptsMade: number): number {
  return Math.min(100 * 2 ** Math.min(attemptsMade - 1, 10), 10_000);
}

const BASE_JOB_OPTIONS: JobsOptions = {
  attempts: RETRY_ATTEMPTS,
  backoff: { type: BACKOFF_TYPE },
  removeOnComplete: { count: 2000, age: 24 * 3600 },
  removeOnFail: { count: 5000, age: 7 * 24 * 3600 },
};

export function createIngestQueue(connection: ConnectionOptions, prefix: string): IngestQueue {
  return new Queue<IngestJobData, IngestResult>(INGEST_QUEUE, { connection, prefix });
}

export function claimJobId(claimId: string): string {
  return `claim-${claimId}`;
}

export async function enqueueDrop(queue: IngestQueue, name: string, receivedAt: number): Promise<void> {
  await queue.add('drop', { name, receivedAt }, { ...BASE_JOB_OPTIONS, deduplication: { id: `drop-${name}`, keepLastIfActive: true } });
}

export async function enqueueClaim(queue: IngestQueue, claimId: string, name: string, receivedAt: number, staged = false) {
  const data: IngestJobData = staged ? { name, receivedAt, claimId, staged } : { name, receivedAt, claimId };
  return queue.add('claim', data, { ...BASE_JOB_OPTIONS, jobId: claimJobId(claimId) });
}
