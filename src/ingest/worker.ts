/**
 * The BullMQ worker: claims the drop (or takes the claim it is given), runs the publisher, and
 * completes the job with the drop's outcome. A rejection is an outcome like any other (it is
 * durable in REJECTED_DIR): the job completes with `{ outcome: 'rejected', reason, detail,
 * rejectionId }`, so the queue's failed jobs are real failures only. Any error is transient: the
 * claim stays in .processing and the job is retried with backoff. A drop job's
 * first start claims with one rename; a later start looks for its earlier claim first (takeClaim).
 * The log line's `timings` are the publisher's (read, validate, store, commit, total) plus `claim`.
 */
import { Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../log.js';
import type { Store } from '../store/store.js';
import { createRedisOutageLog } from '../redis/outage-log.js';
import { INGEST_QUEUE } from '../redis/key-names.js';
import { claimDrop, claimPath, dropClaimId, type Claim } from './drop-folder/inbox.js';
import type { DropResult, Publisher } from './publish/publisher-types.js';
import { BACKOFF_TYPE, backoffDelay, type IngestJobData, type IngestResult } from './queue.js';
import { removeStaged, takeStagedClaim } from './http/staged.js';
import { exists } from '../missing.js';
import { existsSync } from 'node:fs';
import { SYNC_IO_MAX_BYTES } from '../sync-io.js';

export interface WorkerDeps {
  /** The worker's ioredis connection: its status and 'ready' also tell when a Redis outage ends. */
  readonly connection: Redis;
  readonly prefix: string;
  readonly inboxDir: string;
  readonly concurrency: number;
  readonly lockDurationMs: number;
  readonly publish: Publisher;
  /** Where staged uploads are (claim jobs marked `staged`: staged.ts); required to settle those. */
  readonly store?: Store;
  readonly log: Logger;
  /**
   * `ingest.sync_io_max_bytes`: above 0 (the default, SYNC_IO_MAX_BYTES), claims are made with
   * synchronous calls, and staged uploads up to that size written into the inbox so; 0 for an
   * inbox on a network filesystem.
   */
  readonly syncIoMaxBytes?: number;
  /** Called after every settled drop (metrics, follow-up enqueue). */
  readonly onSettled?: (result: DropResult, job: Job<IngestJobData, IngestResult>) => void | Promise<void>;
}

export function createIngestWorker(deps: WorkerDeps): Worker<IngestJobData, IngestResult> {
  const processor = async (job: Job<IngestJobData, IngestResult>): Promise<IngestResult> => {
    const t0 = performance.now();
    const { name, receivedAt, claimId: given, staged } = job.data;
    const syncIoMaxBytes = deps.syncIoMaxBytes ?? SYNC_IO_MAX_BYTES;
    const claim =
      staged && given ? await takeStaged(deps, given, name, receivedAt, syncIoMaxBytes) : await takeClaim(deps.inboxDir, job, name, given, syncIoMaxBytes > 0);
    if (!claim) {
      const fields = { filename: name, jobId: job.id, outcome: 'gone', attempt: job.attemptsMade + 1 };
      // A drop job finding nothing is normal: the drop was already processed (a rescan, a re-drop).
      if (!given || staged) deps.log.info(fields, 'drop gone');
      // A claim job's file is claimed before the job is queued: settled by an earlier attempt, or
      // claimed by a command (publish, rejected retry) that ran with another INBOX_DIR.
      else
        deps.log.warn(
          { ...fields, claimId: given, inbox: deps.inboxDir },
          `drop gone: the claimed file is not in this worker's inbox ${deps.inboxDir} (settled by an earlier attempt, or claimed in another INBOX_DIR)`,
        );
      return { outcome: 'gone', filename: name };
    }
    const claimMs = Math.round((performance.now() - t0) * 100) / 100;

    const result = await deps.publish(claim, new Date(receivedAt));
    // Settled (a rejection too: it is in REJECTED_DIR): the staged bytes are no longer needed.
    if (staged && given && deps.store) await removeStaged(deps.store, given, name, deps.log);
    deps.log.info(
      {
        filename: name,
        jobId: job.id,
        outcome: result.outcome,
        reason: result.reason,
        detail: result.detail,
        rejectionId: result.rejectionId,
        generatedAt: result.generatedAt,
        publishedGeneratedAt: result.publishedGeneratedAt,
        carriedTo: result.carriedTo,
        lagMs: Date.now() - receivedAt,
        timings: { claim: claimMs, ...result.timings },
        attempt: job.attemptsMade + 1,
      },
      `drop ${result.outcome}`,
    );
    await deps.onSettled?.(result, job);
    return {
      outcome: result.outcome,
      filename: result.filename,
      ...(result.reason ? { reason: result.reason, detail: result.detail, rejectionId: result.rejectionId } : {}),
      ...(result.sha256 ? { sha256: result.sha256, generatedAt: result.generatedAt } : {}),
      ...(result.current ? { current: result.current } : {}),
      ...(result.publishedGeneratedAt ? { publishedGeneratedAt: result.publishedGeneratedAt } : {}),
    };
  };

  const worker = new IngestWorker(deps, INGEST_QUEUE, processor, {
    connection: deps.connection,
    prefix: deps.prefix,
    concurrency: deps.concurrency,
    lockDuration: deps.lockDurationMs,
    stalledInterval: Math.max(1000, Math.floor(deps.lockDurationMs / 2)),
    maxStalledCount: 5,
    // After a lost connection (a failover), fetch again within a second, not BullMQ's 15 s.
    runRetryDelay: 1000,
    settings: { backoffStrategy: (attemptsMade: number, type?: string) => (type === BACKOFF_TYPE ? backoffDelay(attemptsMade) : 1000) },
    autorun: true,
  });
  worker.on('failed', (job, err) => {
    deps.log.warn({ filename: job?.data.name, jobId: job?.id, attempt: job?.attemptsMade, err: { message: err.message } }, 'drop will be retried');
  });
  // Connection errors (Redis away): one warn per outage, one info when it ends; others at error.
  const outage = createRedisOutageLog({ log: deps.log, connection: 'worker', redis: deps.connection, errorMsg: 'worker error' });
  outage.watch(worker);
  worker.once('closed', () => outage.close());
  return worker;
}

/**
 * A BullMQ worker that, once closed (in-flight jobs done), writes the manifest and removes the
 * claims of drops published just before (they wait for a manifest that covers them). If that
 * fails, the claims stay in .processing and the next start settles them again.
 */
class IngestWorker extends Worker<IngestJobData, IngestResult> {
  constructor(
    private readonly ingest: Pick<WorkerDeps, 'publish' | 'log'>,
    ...args: ConstructorParameters<typeof Worker<IngestJobData, IngestResult>>
  ) {
    super(...args);
  }

  override async close(force = false): Promise<void> {
    await super.close(force);
    await this.ingest.publish
      .flush()
      .catch((err: unknown) =>
        this.ingest.log.warn(
          { err: { message: (err as Error).message } },
          'could not write the manifest at shutdown; the claims waiting for it are settled on the next start',
        ),
      );
  }
}

/**
 * The claim a job works on. A claim job's file is already claimed: gone means settled before (or
 * claimed in a folder this worker does not watch: the processor logs it at warn).
 * A drop job claims INBOX_DIR/<name> as .processing/d<jobId>-<createdAt>--<name> (dropClaimId). On its first start
 * (BullMQ's attemptsStarted counts every move to active, a restart after a stall or a retry
 * included, so 1 means no earlier run can have claimed) it renames at once; only when the rename
 * finds nothing does it look for an existing claim. A later start looks for its claim first and
 * claims again only when there is none: it must never take a newer drop waiting in the inbox
 * over the claim an earlier run made.
 */
async function takeClaim(
  inboxDir: string,
  job: Job<IngestJobData, IngestResult>,
  name: string,
  given: string | undefined,
  syncIo: boolean,
): Promise<Claim | undefined> {
  const claimId = given ?? dropClaimId(job.id!, job.timestamp);
  const existing: Claim = { claimId, name, path: claimPath(inboxDir, claimId, name) };
  if (given) return (await exists(existing.path)) ? existing : undefined;
  if (isFirstStart(job)) {
    return (await claimDrop(inboxDir, name, claimId, syncIo)) ?? ((await exists(existing.path)) ? existing : undefined);
  }
  return (await exists(existing.path)) ? existing : claimDrop(inboxDir, name, claimId, syncIo);
}

/** A staged claim job's claim: in the inbox already (an earlier attempt), else taken from the store. */
async function takeStaged(
  deps: Pick<WorkerDeps, 'inboxDir' | 'store'>,
  claimId: string,
  name: string,
  receivedAt: number,
  syncIoMaxBytes: number,
): Promise<Claim | undefined> {
  const existing: Claim = { claimId, name, path: claimPath(deps.inboxDir, claimId, name), complete: true };
  if (syncIoMaxBytes > 0 ? existsSync(existing.path) : await exists(existing.path)) return existing;
  if (!deps.store) throw new Error('a staged claim job reached a worker without the store');
  return takeStagedClaim(deps.store, deps.inboxDir, claimId, name, receivedAt, syncIoMaxBytes);
}

/** Unknown (no attemptsStarted) counts as a restart: the careful path. */
function isFirstStart(job: Job<IngestJobData, IngestResult>): boolean {
  return job.attemptsStarted === 1 && job.attemptsMade === 0;
}
