/**
 * Uploads staged in the store. A PUT of /v1/data (http-publish.ts) is received by a reader, which
 * mounts no inbox: it writes the bytes to the store at `incoming/<claimId>--<filename>` and queues
 * a claim job marked `staged`. The worker that takes the job writes them into its own inbox as the
 * claim `.processing/<claimId>--<filename>` (atomically: a crash never leaves part of one), then
 * settles it like any other claim, and removes the staged object once the outcome is settled.
 * Staged objects no pending job names (the reader died between staging and queueing, or the
 * removal failed) are removed by age (sweepStaged, run by workers).
 */
import { randomBytes } from 'node:crypto';
import { renameSync, utimesSync, writeFileSync } from 'node:fs';
import { rename, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { StoreNotFoundError } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { Store } from '../../store/store.js';
import { claimPath, processingDir, type Claim } from '../drop-folder/inbox.js';
import { claimJobId, type IngestQueue } from '../queue.js';

export const STAGED_PREFIX = 'incoming/';

export function stagedKey(claimId: string, name: string): string {
  return `${STAGED_PREFIX}${claimId}--${name}`;
}

/** The claim id and filename of a staged key; undefined for anything else. */
export function parseStagedKey(key: string): { claimId: string; name: string } | undefined {
  if (!key.startsWith(STAGED_PREFIX)) return undefined;
  const rest = key.slice(STAGED_PREFIX.length);
  const i = rest.indexOf('--');
  if (i <= 0 || i + 2 >= rest.length) return undefined;
  return { claimId: rest.slice(0, i), name: rest.slice(i + 2) };
}

/** When a claim id of newClaimId (`p<ms, base 36><8 hex>`) was made; undefined for other ids. */
export function claimIdTime(claimId: string): number | undefined {
  const m = /^p([0-9a-z]+)[0-9a-f]{8}$/.exec(claimId);
  if (!m) return undefined;
  const ms = parseInt(m[1]!, 36);
  return Number.isFinite(ms) ? ms : undefined;
}

/**
 * The staged upload of a claim job as a claim in `inboxDir`: the claim already there (an earlier
 * attempt wrote it), else the staged bytes written there; undefined when neither exists (settled
 * by an earlier attempt). Its mtime is the time of receipt, as recovery reads it. Uploads up to
 * `syncIoMaxBytes` (`ingest.sync_io_max_bytes`) are written with synchronous calls.
 */
export async function takeStagedClaim(
  store: Store,
  inboxDir: string,
  claimId: string,
  name: string,
  receivedAt: number,
  syncIoMaxBytes = 0,
): Promise<Claim | undefined> {
  const claim: Claim = { claimId, name, path: claimPath(inboxDir, claimId, name), complete: true };
  let bytes: Buffer;
  try {
    bytes = await store.get(stagedKey(claimId, name));
  } catch (err) {
    if (err instanceof StoreNotFoundError) return undefined;
    throw err;
  }
  // No `--` in the temporary name: recovery never takes it for a claim.
  const tmp = join(processingDir(inboxDir), `.staged-${randomBytes(6).toString('hex')}.tmp`);
  const at = new Date(receivedAt);
  try {
    // Small uploads with synchronous calls: each hop to the thread pool would wait behind the
    // fsyncs of other publications there (src/sync-io.ts).
    if (bytes.length <= syncIoMaxBytes) {
      writeFileSync(tmp, bytes);
      utimesSync(tmp, at, at);
      renameSync(tmp, claim.path);
    } else {
      await writeFile(tmp, bytes);
      await utimes(tmp, at, at);
      await rename(tmp, claim.path);
    }
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  return claim;
}

/** Remove the staged object of a settled claim (best effort: the sweep removes what is left). */
export async function removeStaged(store: Store, claimId: string, name: string, log: Logger): Promise<void> {
  await store
    .delete(stagedKey(claimId, name))
    .catch((err: unknown) =>
      log.warn({ err: { message: (err as Error).message }, claimId, filename: name }, 'could not remove a staged upload; the sweep removes it later'),
    );
}

const PENDING = new Set(['waiting', 'active', 'delayed', 'prioritized', 'waiting-children']);

/**
 * Remove staged uploads older than `maxAgeMs` whose job is not pending (never queued, or settled
 * and not removed). Resolves to how many were removed.
 */
export async function sweepStaged(deps: { store: Store; queue: IngestQueue; maxAgeMs: number; log: Logger; now?: number }): Promise<number> {
  const now = deps.now ?? Date.now();
  let removed = 0;
  for (const key of await deps.store.list(STAGED_PREFIX)) {
    const staged = parseStagedKey(key);
    const at = staged ? claimIdTime(staged.claimId) : undefined;
    if (staged && at !== undefined && now - at < deps.maxAgeMs) continue;
    if (staged && PENDING.has(await deps.queue.getJobState(claimJobId(staged.claimId)))) continue;
    await deps.store.delete(key);
    deps.log.info({ key, filename: staged?.name }, 'removed a staged upload no job is settling');
    removed++;
  }
  return removed;
}
