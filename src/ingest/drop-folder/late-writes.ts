/**
 * Rejected drops whose writer was still writing. A rejected drop whose bytes were read is kept in
 * REJECTED_DIR as those bytes, and its claim (the file a writer may still hold open) is parked as
 * INBOX_DIR/.rejected-watch/<id>. Each rescan compares a parked file with the rejection: written
 * after its reason.json, or (while no operator has edited the kept copy) grown or written since
 * the kept bytes, the rejection does not stand (it was about bytes the writer went on from), so
 * its folder is removed and the file goes through the pipeline again as a new claim. Parked files
 * quiet for `ingest.settle_max` are removed.
 */
import { lstat, readdir, rename, rm, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../log.js';
import { claimPath, newClaimId } from './inbox.js';
import { enqueueClaim, type IngestQueue } from '../queue.js';
import { readRejection, watchDir, type RejectionRecord } from '../rejections/rejected.js';
import { ifExists, isMissing } from '../../missing.js';

export interface LateWriteDeps {
  readonly inboxDir: string;
  readonly rejectedDir: string;
  readonly queue: IngestQueue;
  /** How long a parked file is watched after its last write. */
  readonly watchMs: number;
  /** Forget a withdrawn rejection where `status` lists the last ones (best effort). */
  readonly forgetRejection?: (record: RejectionRecord) => Promise<void>;
  readonly log: Logger;
}

/** One pass over the parked files; resolves to how many went back into the pipeline. */
export async function checkLateWrites(deps: LateWriteDeps): Promise<number> {
  const dir = watchDir(deps.inboxDir);
  const names = (await ifExists(readdir(dir))) ?? [];
  let requeued = 0;
  for (const name of names) {
    const parked = join(dir, name);
    const id = name;
    const st = await ifExists(lstat(parked));
    if (!st?.isFile()) continue;
    const record = await readRejection(deps.rejectedDir, id);
    const kept = record ? await ifExists(lstat(join(deps.rejectedDir, id, record.filename))) : undefined;
    if (!record || !kept) {
      // The rejection was removed (retried, cleaned up): nothing left to compare with.
      await ifExists(unlink(parked));
      continue;
    }
    // Written after the rejection was (its reason.json), or unlike the kept bytes: the writer went
    // on. The kept copy is compared only while it is as judged (not written after reason.json): an
    // operator may fix it in place before a `rejected retry`, and that is no late write.
    const reason = await ifExists(lstat(join(deps.rejectedDir, id, 'reason.json')));
    const keptAsJudged = reason !== undefined && kept.mtimeMs <= reason.mtimeMs;
    const written = (reason !== undefined && st.mtimeMs > reason.mtimeMs) || (keptAsJudged && (st.size !== kept.size || st.mtimeMs > kept.mtimeMs));
    if (!written) {
      if (Date.now() - Math.max(st.mtimeMs, kept.mtimeMs) >= deps.watchMs) await ifExists(unlink(parked));
      continue;
    }
    const claimId = newClaimId();
    try {
      await rename(parked, claimPath(deps.inboxDir, claimId, record.filename));
    } catch (err) {
      if (isMissing(err)) continue; // taken by another watcher
      throw err;
    }
    // From here the claim is safe: should the queueing fail, the rescan recovers it (recovery.ts).
    await rm(join(deps.rejectedDir, id), { recursive: true, force: true });
    await deps.forgetRejection?.(record).catch(() => undefined);
    await enqueueClaim(deps.queue, claimId, record.filename, Date.now());
    deps.log.info(
      { filename: record.filename, rejectionId: id, reason: record.reason, claimId },
      'a rejected drop was still being written: its rejection is withdrawn and it goes through the pipeline again',
    );
    requeued++;
  }
  return requeued;
}
