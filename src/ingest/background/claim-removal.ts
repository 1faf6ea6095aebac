/**
 * The claims (.processing files) of settled drops that wait for the manifest before they go: a
 * published drop's claim once a manifest covering its commit is written, an `unchanged` drop's
 * claim after the next check of the manifest against the catalog (it may have been committed by
 * an attempt that died before the manifest was written).
 *
 * A manifest covers a commit when its seq has reached the commit's and it holds the version (or
 * a newer one) under the filename. A Redis that lost its last commits gives their seqs to new
 * ones, so the seq alone would remove the claim of a publication no manifest or catalog holds:
 * such a claim stays, and recovery publishes it again.
 */
import { unlinkSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import type { CatalogEntry } from '../../catalog/types.js';
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

/** What a published claim's commit put in the catalog (what a covering manifest must hold). */
export type CommittedVersion = Pick<CatalogEntry, 'filename' | 'sha256' | 'sourceSha256' | 'generatedAtMs' | 'publishedAt' | 'size'>;

/** Whether the manifest just written (or read) holds `version` or a newer one under its filename. */
export type ManifestHolds = (version: CommittedVersion) => boolean;

export interface ClaimRemoval {
  /** Remove the claim once a manifest covering `seq` and holding `version` is written. */
  afterManifest(seq: number, claim: ClaimRef, version?: CommittedVersion): void;
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
  /**
   * Remove the claims a manifest at `written` covers; those within its seq whose version it does
   * not hold are left to recovery (their commits were lost). Resolves to how many were left.
   */
  removeCovered(written: number, holds: ManifestHolds): Promise<number>;
  /** The catalog went back (Redis lost commits): every claim waiting is judged by the next manifest, whatever its seq. */
  rebase(): void;
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
  readonly version?: CommittedVersion;
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
  const remove = async (all: readonly { readonly claim: ClaimRef; readonly version?: CommittedVersion }[]) => {
    for (const c of all) release(c.claim);
    const list = await keepWrittenSince(all);
    const later: string[] = [];
    for (const c of list) {
      const path = pathOf(c.claim);
      if (c.version === undefined || c.version.size > syncIoMaxBytes) later.push(path);
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
    afterManifest(seq, claim, version) {
      claim = keep(claim);
      covered.push(version !== undefined ? { seq, claim, version } : { seq, claim });
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
    async removeCovered(written, holds) {
      const due = covered.filter((c) => c.seq <= written);
      covered = covered.filter((c) => c.seq > written);
      const lost = due.filter((c) => c.version !== undefined && !holds(c.version));
      for (const c of lost) {
        release(c.claim);
        log.warn(
          { filename: c.version!.filename, sha256: c.version!.sha256, path: pathOf(c.claim) },
          'Redis lost the commit of a publication (the catalog went back): its claim stays, and recovery publishes it again',
        );
      }
      await remove(lost.length === 0 ? due : due.filter((c) => !lost.includes(c)));
      return lost.length;
    },
    rebase() {
      covered = covered.map((c) => ({ ...c, seq: 0 }));
    },
    pending: () => covered.length + checks.length,
  };
}
