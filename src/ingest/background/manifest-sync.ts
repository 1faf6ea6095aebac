/**
 * Keeps manifest.json in the store in step with the catalog, in the background, for the publish
 * step of one process. The job ends at the commit; one writer per process writes the manifest,
 * coalescing every commit made meanwhile (writing it in each publish cost O(feeds) per drop, so
 * O(N²) for a burst of N feeds), then removes the claims (claim-removal.ts) and deletes the
 * evicted versions (eviction.ts) the write covers. The catalog it writes from is kept in memory
 * and advanced by this process's own commits (catalog-mirror.ts).
 *
 * The coalescing window follows the cost of a write: four times the last one took, at least
 * `coalesceMs`, at most `maxCoalesceMs`, so the writer is busy a fifth of the time at most,
 * whatever the number of feeds. Freshness does not depend on it (readers learn of commits from
 * Redis, not from the manifest); only how long settled claims stay in .processing does.
 *
 * What stays true:
 * - A claim is removed only after its commit and a manifest reflecting it are durable. A crash
 *   before that leaves the claim in .processing: it is queued again (recovery.ts), found already
 *   committed (`unchanged`), and removed after the manifest check below. A manifest reflects a
 *   commit when it holds its version or a newer one, not only when its seq has reached the
 *   commit's (claim-removal.ts).
 * - Redis that lost its last commits (the catalog's seq went back: a commit says so, the store's
 *   manifest is ahead of the catalog, or the catalog lacks a version the manifest holds:
 *   manifest-lacks.ts) is restored from the manifest before the next write
 *   (onCatalogBehind), so a manifest holding versions the catalog lost is never written over by
 *   one without them; the claims of commits no manifest holds stay, and recovery publishes them again.
 * - The manifest is written from a whole catalog snapshot: the catalog exactly as it was at one seq.
 *   Two processes may race (one writes an older snapshot over a newer one): the writer that saw the
 *   catalog move during its write reads the manifest back and, if it is behind the catalog, writes
 *   the catalog as it is now (the newer manifest it may have covered over was written by a process
 *   that removed its claims and will not look again).
 * - An evicted version is deleted only once a manifest newer than its eviction is in the store.
 * - check() (an `unchanged` drop: maybe processed again after a crash between commit and manifest)
 *   and a periodic check compare the store's manifest with the catalog and write it when behind.
 */
import { renderManifest } from '../../catalog/manifest.js';
import type { Catalog } from '../../catalog/redis-catalog.js';
import type { CatalogEntry } from '../../catalog/types.js';
import { holdsVersion } from '../publish/decide.js';
import type { Logger } from '../../log.js';
import { MANIFEST_KEY, type Store } from '../../store/store.js';
import { createBackgroundStep } from './background-step.js';
import { createCatalogMirror } from './catalog-mirror.js';
import { createClaimRemoval, type ClaimRef, type ManifestHolds } from './claim-removal.js';
import { createEviction } from './eviction.js';
import { createHistoryRecords } from './history-records.js';
import { createManifestGuard, writersManifest } from './manifest-lacks.js';

export interface ManifestWriter {
  /** A version was committed at `seq`; `evicted` fell out of the filename's history; `claim` is
   *  removed once a manifest covering `seq` is written. `entry` is what was committed: with it the
   *  next write applies the commit to the catalog it holds instead of re-reading the catalog. */
  committed(
    seq: number,
    filename: string,
    evicted: readonly string[],
    claim: ClaimRef,
    entry?: CatalogEntry,
    history?: { readonly added: string; readonly removed: readonly string[] },
  ): void;
  /** Compare the manifest with the catalog soon (writing it if behind), then remove `claim`. */
  check(claim: ClaimRef): void;
  /**
   * A commit found the catalog's seq below one this process was given before (Redis lost commits):
   * the catalog is restored from the manifest before the next write, and the claims waiting are
   * judged by what that write holds.
   */
  wentBack(seq: number): void;
  /** Write what is pending and remove the claims waiting for it; rejects if the store or Redis fail. */
  flush(): Promise<void>;
  /** Claims waiting for a manifest write. */
  pending(): number;
  /** The coalescing window now, ms (what the next commit waits at most for its write). */
  windowMs(): number;
  /** Stop the timers (a write under way finishes). */
  close(): void;
}

export interface ManifestWriterOptions {
  readonly catalog: Catalog;
  readonly store: Store;
  readonly log: Logger;
  /** Commits made within this window share one write (the window while writes are rare). */
  readonly coalesceMs?: number;
  /** The longest the window grows to when writes are slow (default 500 ms). */
  readonly maxCoalesceMs?: number;
  /** Period of the check against the catalog (repairs after a crash elsewhere). */
  readonly checkEveryMs?: number;
  /**
   * Claims of known size up to this many bytes are removed with a synchronous unlink
   * (`ingest.sync_io_max_bytes`; 0, the default here: every removal on the thread pool).
   */
  readonly syncIoMaxBytes?: number;
  /** The clock a write is timed with, ms (default performance.now; tests pass their own). */
  readonly now?: () => number;
  /**
   * Restores the catalog from the store's manifest (forced): called when Redis lost commits, and
   * awaited before the next manifest write; a rejection is retried.
   */
  readonly onCatalogBehind?: () => Promise<void>;
}

export function createManifestWriter(opts: ManifestWriterOptions): ManifestWriter {
  const { catalog, store, log } = opts;
  const coalesceMs = opts.coalesceMs ?? 10;
  const maxCoalesceMs = Math.max(coalesceMs, opts.maxCoalesceMs ?? 500);
  const now = opts.now ?? (() => performance.now());
  const mirror = createCatalogMirror(catalog);
  const claims = createClaimRemoval({ log, ...(opts.syncIoMaxBytes !== undefined ? { syncIoMaxBytes: opts.syncIoMaxBytes } : {}) });
  const eviction = createEviction({ catalog, store, log });
  const records = createHistoryRecords({ catalog, store, log });
  // Without a restore to call, nothing is checked before a write (tests, one-off publishers).
  const guard = opts.onCatalogBehind ? createManifestGuard({ mirror, store, log }) : { snapshot: () => mirror.read(), wrote: () => undefined };
  /** The coalescing window: four times what the last write took, within [coalesceMs, maxCoalesceMs]. */
  let windowMs = coalesceMs;
  /** The catalog seq the manifest must reach: this process's commits, or a repair it took on. */
  let own = 0;
  /** The manifest in the store is known to reflect the catalog up to this seq. */
  let written = -1;
  /** Compare the store's manifest with the catalog, and take over if it is behind. */
  let checkAll = false;
  /** Our last write raced other commits: make sure an older snapshot did not overwrite it. */
  let verifyOwn = false;
  /** The store's manifest was seen ahead of the catalog (see step). */
  let catalogReset = false;
  /** Redis lost commits: restore the catalog from the manifest before writing one. */
  let restoreDue = false;
  /** flush() runs the step: everything pending is written, the history records too. */
  let flushing = false;

  const step = async () => {
    if (restoreDue && opts.onCatalogBehind) await opts.onCatalogBehind();
    restoreDue = false;
    const checked = claims.takeChecks();
    const all = checkAll;
    const verify = verifyOwn;
    checkAll = false;
    verifyOwn = false;
    /** What the manifest this step wrote, or read from the store, holds: covered claims go only with it. */
    let holds: ManifestHolds | undefined;
    try {
      if (all || verify || checked.length > 0) {
        const seq = await catalog.seq();
        // Unless asked to look (start, period, a raced write), trust what this process wrote.
        if (all || verify || seq > written) {
          const manifest = await writersManifest((key) => store.get(key), log);
          const stored = manifest?.seq ?? -1;
          // Behind the catalog: whoever committed died before writing it (or is about to). After
          // a raced write (verify) whose snapshot is still the one in the store, ours may have
          // landed over a newer manifest whose writer has removed its claims and will not look
          // again: take over too. (A newer manifest in the store is its writer's to verify.)
          const oursLanded = verify && stored === written;
          if ((all || oursLanded || checked.length > 0) && stored < seq && seq > own) own = seq;
          written = stored;
          holds = (v) => holdsVersion(manifest && Object.hasOwn(manifest.files, v.filename) ? manifest.files[v.filename] : undefined, v);
          // Ahead of the catalog: Redis lost commits. The manifest is left as it is, the catalog is
          // restored from it (onCatalogBehind, the next step), and this process's next commit
          // writes the manifest from the whole catalog again.
          if (stored > seq) {
            catalogReset = true;
            restoreDue = true;
            mirror.forget();
          }
        }
      }
      // A periodic or start-up check re-reads the whole catalog on the next write: whatever
      // happened to it meanwhile (Redis restarted on older data), the mirror is rebuilt from it.
      if (all) mirror.forget();
      const started = now();
      const due = own > written && !restoreDue;
      const at = due ? await guard.snapshot() : undefined;
      // The catalog lacks what the store's manifest holds: restored from it before the next write.
      if (due && !at) restoreDue = true;
      if (at) {
        const bytes = renderManifest(at.seq, new Date(), at.files);
        await store.put(MANIFEST_KEY, bytes, 'application/json');
        guard.wrote(bytes);
        written = at.seq;
        holds = (v) => {
          const json = at.get(v.filename);
          return json !== undefined && holdsVersion(JSON.parse(json) as CatalogEntry, v);
        };
        windowMs = Math.min(maxCoalesceMs, Math.max(coalesceMs, 4 * (now() - started)));
        // Others committed meanwhile and may write an older snapshot over ours: look again soon.
        // Commits all known to be our own need no look (nobody else writes for them).
        const latest = await catalog.seq();
        for (let seq = at.seq + 1; seq <= latest && !verifyOwn; seq++) if (!mirror.isOwn(seq)) verifyOwn = true;
      }
    } catch (err) {
      claims.putBackChecks(checked);
      checkAll ||= all;
      verifyOwn ||= verify;
      throw err;
    }
    await claims.removeChecked(checked);
    if (holds) await claims.removeCovered(written, holds);
    await eviction.deleteCovered(written);
    // The store's history records (history-records.ts): a log object once they are due (or when
    // flushing); at start and periodically, a history index Redis lost is rebuilt from them, and
    // a long log merged.
    if (flushing || records.dueInMs() === 0) await records.flush();
    if (all) {
      await records.repair();
      await records.tidy();
    }
  };

  const settled = () => own <= written && !checkAll && !verifyOwn && claims.pending() === 0 && records.pending() === 0;
  const manifestDue = () => own > written || checkAll || verifyOwn || restoreDue || claims.awaitingCheck();
  const background = createBackgroundStep({
    step,
    more: () => manifestDue() || records.pending() > 0,
    delay: () => (manifestDue() ? windowMs : Math.max(windowMs, Math.min(records.dueInMs(), 60_000))),
    onFailure: (err, attempt) => log.warn({ err: { message: (err as Error).message }, attempt }, 'could not write the manifest; will retry'),
  });

  const periodic = setInterval(() => {
    checkAll = true;
    background.schedule(0);
  }, opts.checkEveryMs ?? 10_000);
  periodic.unref();
  // Once at start: a previous process may have died between a commit and the manifest.
  checkAll = true;
  background.schedule(coalesceMs);

  return {
    committed(seq, filename, evicted, claim, entry, history) {
      if (catalogReset) {
        // The catalog started afresh (Redis lost its data): its seqs start again too. Claims of
        // commits from before stay in .processing; recovery publishes them into the new catalog.
        catalogReset = false;
        written = -1;
        own = seq;
      }
      if (seq > own) own = seq;
      mirror.committed(seq, filename, entry);
      eviction.evicted(seq, filename, evicted);
      if (history) records.committed(filename, history.added, history.removed);
      claims.afterManifest(seq, claim, entry);
      background.schedule(windowMs);
    },
    wentBack(seq) {
      log.warn({ seq }, 'the catalog went back (Redis lost its last commits): restoring it from the manifest before writing one');
      mirror.reset();
      claims.rebase();
      catalogReset = false;
      restoreDue = true;
      written = -1;
      own = seq;
      background.schedule(0);
    },
    check(claim) {
      claims.afterCheck(claim);
      background.schedule(windowMs);
    },
    async flush() {
      flushing = true;
      try {
        for (let i = 0; i < 5; i++) {
          await background.runNow();
          if (settled()) return;
          if (background.failures() > 0) break;
        }
      } finally {
        flushing = false;
      }
      throw new Error(`the manifest could not be written; ${claims.pending()} claims stay in .processing until it is`);
    },
    pending: () => claims.pending(),
    windowMs: () => windowMs,
    close() {
      clearInterval(periodic);
      background.close();
    },
  };
}
