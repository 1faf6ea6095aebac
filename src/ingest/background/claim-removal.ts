/**
 * The claims (.processing files) of settled drops that wait for the manifest before they go: a
 * published drop's claim once a manifest covering its commit is written, an `unchanged` drop's
 * claim after the next check of the manifest against the catalog (it may have been committed by
 * an attempt that died before the manifest was written).
 */
import { unlinkSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import type { Logger } from '../../log.js';
import { writtenSince, type SeenClaim } from '../drop-folder/written-since.js';
import { inBatches } from './cleanup-batch.js';
import { isMissing } from '../../missing.js';

/**
 * A settled claim: its path, and what was read of it when it was settled. With `seen`, a claim
 * written since (a writer rewriting it in place: written-since.ts) is kept, not removed: recovery
 * queues it again once quiet, so its newer content is processed too. `held`: the bytes read, so
 * the check compares bytes instead of hashing them (kept up to HELD_MAX_BYTES in all).
 */
export type ClaimRef = string | { readonly path: string; readonly seen: SeenClaim; readonly held?: Buffer };

/** The bytes of pending claims kept for their check, at most; past it a claim is checked by its SHA-256. */
const HELD_MAX_BYTES = 16 * 1024 * 1024;

const pathOf = (c: ClaimRef): string => (typeof c === 'string' ? c : c.path);

export interface ClaimRemoval {
  /** Remove the claim once a manifest covering `seq` is written; `bytes`: the drop's size, when known. */
  afterManifest(seq: number, claim: ClaimRef, bytes?: number): void;
  /** Remove the claim after the next check of the manifest. */
  afterCheck(claim: ClaimRef): void;
  /** Whether claims wait for a check. */
  awaitingCheck(): boolean;
  /** The claims waiting for a check, handed to the check about to start. */
  takeChecks(): ClaimRef[];
  /** The check those claims were handed to failed: they wait for the next one. */
  putBackChecks(claims: readonly ClaimRef[]): void;
  /** Remove claims whose check is done. */
  removeChecked(claims: readonly ClaimRef[]): Promise<void>;
  /** Remove the claims a manifest at `written` covers. */
  removeCovered(written: number): Promise<void>;
  /** Claims waiting (for a manifest or a check). */
  pending(): number;
}

export interface ClaimRemovalOptions {
  readonly log: Logger;
  /**
   * Claims of known size up to this many bytes are removed with a synchronous unlink
   * (`ingest.sync_io_max_bytes`; 0, the default here: every removal on the thread pool).
   */
  readonly syncIoMaxBytes?: number;
}

interface PendingClaim {
  readonly seq: number;
  readonly claim: ClaimRef;
  readonly bytes?: number;
}

export function createClaimRemoval(opts: ClaimRemovalOptions): ClaimRemoval {
  const { log } = opts;
  const syncIoMaxBytes = opts.syncIoMaxBytes ?? 0;
  let covered: PendingClaim[] = [];
  let checks: ClaimRef[] = [];
  let heldBytes = 0;

  /** The claim as kept until its check: its bytes only while the total stays under the bound. */
  const keep = (claim: ClaimRef): ClaimRef => {
    if (typeof claim === 'string' || !claim.held) return claim;
    if (heldBytes + claim.held.length > HELD_MAX_BYTES) return { path: claim.path, seen: claim.seen };
    heldBytes += claim.held.length;
    return claim;
  };
  const release = (claim: ClaimRef) => {
    if (typeof claim !== 'string' && claim.held) heldBytes -= claim.held.length;
  };

  const notRemoved = (err: NodeJS.ErrnoException, path: string) => {
    if (!isMissing(err)) log.warn({ err: { message: err.message }, path }, 'could not remove a settled claim; recovery will settle it again');
  };

  /**
   * Small claims of known size go at once with unlinkSync (a metadata call of microseconds, where
   * a hop to the thread pool costs 0.1–0.3 ms: src/sync-io.ts), the others on the thread pool,
   * CLEANUP_BATCH at a time.
   */
  const remove = async (all: readonly { readonly claim: ClaimRef; readonly bytes?: number }[]) => {
    for (const c of all) release(c.claim);
    const list = await keepWrittenSince(all);
    const later: string[] = [];
    for (const c of list) {
      const path = pathOf(c.claim);
      if (c.bytes === undefined || c.bytes > syncIoMaxBytes) later.push(path);
      else {
        try {
          unlinkSync(path);
        } catch (err) {
          notRemoved(err as NodeJS.ErrnoException, path);
        }
      }
    }
    await inBatches(later, (path) => unlink(path).catch((err: NodeJS.ErrnoException) => notRemoved(err, path)));
  };

  /** The claims to remove: those not written since they were read (the others stay, for recovery). */
  const keepWrittenSince = async <C extends { readonly claim: ClaimRef }>(list: readonly C[]): Promise<C[]> => {
    const out: C[] = [];
    for (const c of list) {
      if (typeof c.claim !== 'string' && (await writtenSince(c.claim.path, c.claim.seen, syncIoMaxBytes, c.claim.held))) {
        log.info({ path: c.claim.path }, 'a settled drop was written again in place: its claim stays and is processed again once quiet');
        continue;
      }
      out.push(c);
    }
    return out;
  };

  return {
    afterManifest(seq, claim, bytes) {
      claim = keep(claim);
      covered.push(bytes !== undefined ? { seq, claim, bytes } : { seq, claim });
    },
    afterCheck(claim) {
      checks.push(keep(claim));
    },
    awaitingCheck: () => checks.length > 0,
    takeChecks() {
      const taken = checks;
      checks = [];
      return taken;
    },
    putBackChecks(claims) {
      checks.push(...claims);
    },
    removeChecked: (claims) => remove(claims.map((claim) => ({ claim }))),
    async removeCovered(written) {
      const due = covered.filter((c) => c.seq <= written);
      covered = covered.filter((c) => c.seq > written);
      await remove(due);
    },
    pending: () => covered.length + checks.length,
  };
}
