/**
 * Claims in INBOX_DIR/.processing whose job is no longer pending (the process died, Redis lost
 * the job, retries ran out) are queued again as claim jobs, so nothing claimed is ever stranded.
 */
import { lstat, readdir } from 'node:fs/promises';
import type { Logger } from '../../log.js';
import { parseClaimFileName, parseDropClaimId, processingDir } from './inbox.js';
import { claimJobId, enqueueClaim, type IngestQueue } from '../queue.js';
import { ifExists } from '../../missing.js';

const PENDING = new Set(['waiting', 'active', 'delayed', 'prioritized', 'waiting-children']);

/**
 * A claim renamed into .processing this recently is left alone: a published drop's claim stays
 * until the manifest covering it is written (manifest-sync.ts), after its job has completed.
 */
export const RECENT_CLAIM_MS = 10_000;

export async function recoverClaims(deps: {
  inboxDir: string;
  queue: IngestQueue;
  log: Logger;
  /** Claims younger than this are left alone (default RECENT_CLAIM_MS; tests shorten it). */
  recentClaimMs?: number;
}): Promise<number> {
  const recentMs = deps.recentClaimMs ?? RECENT_CLAIM_MS;
  const names = await ifExists(readdir(processingDir(deps.inboxDir)));
  if (!names) return 0;
  let recovered = 0;
  for (const fileName of names) {
    const claim = parseClaimFileName(deps.inboxDir, fileName);
    if (!claim) continue;
    const st = await ifExists(lstat(claim.path));
    if (!st) continue;
    // rename() sets the ctime: this is when the drop was claimed.
    if (Date.now() - st.ctimeMs < recentMs) continue;
    const drop = parseDropClaimId(claim.claimId);
    if (drop && (await ownerPending(deps.queue, drop.jobId, drop.createdAtMs))) continue;
    const jobId = claimJobId(claim.claimId);
    const state = await deps.queue.getJobState(jobId);
    if (PENDING.has(state)) continue;
    // A finished job with this id would make the add below a no-op: clear it first.
    if (state !== 'unknown') {
      const job = await deps.queue.getJob(jobId);
      await job?.remove().catch(() => undefined);
    }
    await enqueueClaim(deps.queue, claim.claimId, claim.name, Math.floor(st.mtimeMs));
    deps.log.info({ filename: claim.name, claimId: claim.claimId }, 'recovered a claimed drop whose job was lost');
    recovered++;
  }
  return recovered;
}

/**
 * Is the drop job that made a claim still pending? A job of that id created at another time is
 * not its owner: Redis lost its data and BullMQ's ids started again (dropClaimId).
 */
async function ownerPending(queue: IngestQueue, jobId: string, createdAtMs: number | undefined): Promise<boolean> {
  if (!PENDING.has(await queue.getJobState(jobId))) return false;
  if (createdAtMs === undefined) return true;
  const job = await queue.getJob(jobId);
  return job !== undefined && Math.floor(job.timestamp) === createdAtMs;
}
