/**
 * The ingest queue. Two kinds of job:
 * - drop {name}: "INBOX_DIR/<name> changed". Deduplicated by filename with keepLastIfActive, so a
 *   burst of rewrites of one filename never piles up jobs nor runs two versions at once.
 * - claim {name, claimId}: "process the already-claimed file .processing/<claimId>--<name>"
 *   (publish, rejected retry, recovery of claims whose job was lost). Job id `claim-<claimId>`.
 *   With `staged` the bytes are in the store instead, at incoming/<claimId>--<name> (a PUT of
 *   /v1/data: staged.ts); the worker brings them into its inbox as that claim first.
 */
import { Queue, QueueEvents, type ConnectionOptions, type JobsOptions } from 'bullmq';
import type { DropOutcome } from '../catalog/types.js';
import { INGEST_QUEUE } from '../redis/key-names.js';
import type { DropResult } from './publish/publisher-types.js';

export interface IngestJobData {
  readonly name: string;
  /** When the drop was seen (ms since the epoch): the stamp for a missing generated_at. */
  readonly receivedAt: number;
  /** Set on claim jobs. */
  readonly claimId?: string;
  /** The claim's bytes are staged in the store (staged.ts), not in an inbox. */
  readonly staged?: boolean;
}

/**
 * A completed job's return value: how its drop was settled (the publisher's result, less what
 * only the worker's log needs), or `gone`: there was nothing to settle.
 */
export type IngestResult = Omit<DropResult, 'outcome' | 'timings' | 'carriedTo'> & { readonly outcome: DropOutcome | 'gone' };

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

/**
 * The queue's events, ready to read (from `lastEventId`; by default only events written from now
 * on). Closed again when it cannot connect, so a failed open leaves no connection behind.
 */
export async function openQueueEvents(connection: ConnectionOptions, prefix: string, lastEventId?: string): Promise<QueueEvents> {
  const events = new QueueEvents(INGEST_QUEUE, { connection, prefix, ...(lastEventId === undefined ? {} : { lastEventId }) });
  try {
    await events.waitUntilReady();
  } catch (err) {
    await events.close().catch(() => undefined);
    throw err;
  }
  return events;
}
