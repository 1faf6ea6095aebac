/**
 * Keeps manifest.json in the store in step with the catalog, in the background, for the publish
 * step of one process, and removes each published drop's claim once a manifest that covers it is
 * written (so an empty inbox still means: published, manifest included; with several worker
 * processes, give or take one window: see the race below).
 *
 * Why in the background: the manifest holds every feed, so writing it in each publish (with the
 * job waiting for it) cost O(feeds) per drop while holding a slot of the worker's concurrency; a
 * burst of N distinct feeds cost O(N²): 1,000 feeds published at ~57/s (test/faults.storm.test.ts).
 * Now the job ends at the commit; one writer per process writes the manifest, coalescing every
 * commit made meanwhile, then removes the claims and deletes the evicted versions it covers.
 *
 * Why not O(feeds) per write either: re-reading the whole catalog (HGETALL, every entry parsed and
 * serialized again) for each write cost ~40 % of the throughput at 3,800 feeds. The writer keeps
 * the catalog as of its last write in memory (each entry's JSON) and applies this process's own
 * commits to it (committed() carries the entry); it re-reads the whole catalog only when the
 * catalog's seq shows commits this process did not make (another worker), when a commit came
 * without its entry, and after every periodic check. The coalescing window follows the cost of a
 * write: four times the last one took, at least `coalesceMs`, at most `maxCoalesceMs`, so the
 * writer is busy a fifth of the time at most, whatever the number of feeds. With a small catalog
 * (a write of a few ms) claims leave .processing within `coalesceMs`; with thousands of feeds
 * they wait a little longer, and freshness is unaffected either way (readers learn of commits from
 * Redis, not from the manifest). A window that grew with every write in a burst (tried first) held
 * every claim up to 500 ms and halved the drops settled per second at 38 feeds.
 *
 * What stays true:
 * - A claim is removed only after its commit and a manifest reflecting it are durable. A crash
 *   before that leaves the claim in .processing: it is queued again (recovery.ts), found already
 *   committed (`unchanged`), and removed after the manifest check below.
 * - The manifest is written from a whole catalog snapshot: the catalog exactly as it was at one seq
 *   (read just before the write), either re-read or the previous one plus every commit since, all
 *   of them this process's own. Two processes may race (one writes an older snapshot over a newer
 *   one): the writer that saw the catalog move during its write reads the manifest back and, if it
 *   is behind the catalog, writes the catalog as it is now (the newer manifest it may have covered
 *   over was written by a process that removed its claims and will not look again).
 * - An evicted version is deleted only once a manifest newer than its eviction is in the store, so
 *   a reader that starts from the manifest (Redis away) never finds it naming a deleted object. A
 *   crash before that leaves the old object behind (garbage), never a dangling manifest.
 * - check() (an `unchanged` drop: maybe processed again after a crash between commit and manifest)
 *   and a periodic check compare the store's manifest with the catalog and write it when behind.
 */
import { unlinkSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import { MANIFEST_KEY, objectKey, type Store } from '../store/store.js';
import { readManifest, renderManifest } from '../catalog/manifest.js';
import type { Catalog } from '../catalog/redis-catalog.js';
import type { CatalogEntry } from '../catalog/types.js';
import type { Logger } from '../log.js';

export interface ManifestWriter {
  /** A version was committed at `seq`; `evicted` fell out of the filename's history; `claim` is
   *  removed once a manifest covering `seq` is written. `entry` is what was committed: with it the
   *  next write applies the commit to the catalog it holds instead of re-reading the catalog. */
  committed(seq: number, filename: string, evicted: readonly string[], claim: string, entry?: CatalogEntry): void;
  /** Compare the manifest with the catalog soon (writing it if behind), then remove `claim`. */
  check(claim: string): void;
  /** Write what is pending and remove the claims waiting for it; rejects if the store or Redis fail. */
  flush(): Promise<void>;
  /** Claims waiting for a manifest write. */
  pending(): number;
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
}

interface PendingDelete {
  readonly seq: number;
  readonly filename: string;
  readonly sha256: string;
}

interface PendingClaim {
  readonly seq: number;
  readonly path: string;
  /** The drop's size, when known (a commit's entry). */
  readonly bytes?: number;
}

const MAX_RETRY_MS = 10_000;

/**
 * Cleanup (claim removals, old-version deletes) runs this many calls at a time: a write that
 * covers a burst of commits settles them together instead of one round trip after another, and
 * a store (S3) is not sent hundreds of deletes at once.
 */
export const CLEANUP_BATCH = 8;

async function inBatches<T>(items: readonly T[], fn: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += CLEANUP_BATCH) await Promise.all(items.slice(i, i + CLEANUP_BATCH).map(fn));
}

/** The catalog as of `seq`: filename → entry JSON (as stored in Redis). */
interface Mirror {
  seq: number;
  readonly files: Map<string, string>;
  /** The filenames sorted; undefined when a filename was added since. */
  names: string[] | undefined;
}

export function createManifestWriter(opts: ManifestWriterOptions): ManifestWriter {
  const { catalog, store, log } = opts;
  const syncIoMaxBytes = opts.syncIoMaxBytes ?? 0;
  const coalesceMs = opts.coalesceMs ?? 10;
  const maxCoalesceMs = Math.max(coalesceMs, opts.maxCoalesceMs ?? 500);
  /** The coalescing window: four times what the last write took, within [coalesceMs, maxCoalesceMs]. */
  let windowMs = coalesceMs;
  /** When the last write (or check) ended; -Infinity before the first. */
  /** The catalog as of the last write (or re-read); undefined: re-read it on the next write. */
  let mirror: Mirror | undefined;
  /** This process's commits not yet applied to the mirror: seq → [filename, entry JSON]. */
  const ownCommits = new Map<number, readonly [string, string]>();
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
  let deletes: PendingDelete[] = [];
  let claims: PendingClaim[] = [];
  /** Claims to remove after the next check (registered before it started). */
  let checkClaims: string[] = [];
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let failures = 0;
  let closed = false;

  const schedule = (delay: number) => {
    if (closed || timer || running) return;
    timer = setTimeout(() => {
      timer = undefined;
      void run();
    }, delay);
    timer.unref();
  };

  const claimNotRemoved = (err: NodeJS.ErrnoException, path: string) => {
    if (err.code !== 'ENOENT') log.warn({ err: { message: err.message }, path }, 'could not remove a settled claim; recovery will settle it again');
  };

  /**
   * Remove settled claims: small ones of known size at once with unlinkSync (a metadata call of
   * microseconds, where a hop to the thread pool costs 0.1–0.3 ms: src/sync-io.ts), the others
   * on the thread pool, CLEANUP_BATCH at a time.
   */
  const removeClaims = async (list: readonly PendingClaim[]) => {
    const later: string[] = [];
    for (const c of list) {
      if (c.bytes === undefined || c.bytes > syncIoMaxBytes) later.push(c.path);
      else {
        try {
          unlinkSync(c.path);
        } catch (err) {
          claimNotRemoved(err as NodeJS.ErrnoException, c.path);
        }
      }
    }
    await inBatches(later, (path) => unlink(path).catch((err: NodeJS.ErrnoException) => claimNotRemoved(err, path)));
  };

  const afterWrite = async () => {
    const dueClaims = claims.filter((c) => c.seq <= written);
    claims = claims.filter((c) => c.seq > written);
    await removeClaims(dueClaims);
    const due = deletes.filter((d) => d.seq <= written);
    deletes = deletes.filter((d) => d.seq > written);
    if (due.length === 0) return;
    // A version may have been published again since it was evicted: never delete what is current.
    // One HMGET for them all; if Redis fails, nothing is deleted (garbage, never a dangling name).
    const latest = await catalog.getMany(due.map((d) => d.filename)).catch(() => undefined);
    if (!latest) return;
    const doomed = due.filter((d, i) => latest[i] !== undefined && latest[i]!.sha256 !== d.sha256);
    await inBatches(doomed, (d) =>
      store.delete(objectKey(d.filename, d.sha256)).catch((err: unknown) =>
        log.warn({ err, filename: d.filename, sha: d.sha256 }, 'could not delete an old version'),
      ),
    );
  };

  /**
   * The catalog exactly as of one recent seq, sorted by filename: the mirror advanced through this
   * process's own commits since, as far as they follow each other; else the whole catalog, read
   * again. A commit whose committed() has not come yet (it is reported just after the commit) ends
   * the run like another process's would: what follows it is written next time.
   */
  const currentCatalog = async (): Promise<{ seq: number; files: Iterable<readonly [string, string]> }> => {
    // Only when the next commit after the mirror is ours can the mirror be advanced: one GET of
    // the seq says how far the catalog has gone.
    const next = mirror && ownCommits.has(mirror.seq + 1) ? await catalog.seq() : undefined;
    if (!mirror || next === undefined || advanceMirror(mirror, next) === 0) {
      const snapshot = await catalog.snapshotJson();
      mirror = { seq: snapshot.seq, files: new Map(snapshot.entries), names: snapshot.entries.map(([f]) => f) };
    }
    for (const s of ownCommits.keys()) if (s <= mirror.seq) ownCommits.delete(s);
    const m = mirror;
    m.names ??= [...m.files.keys()].sort((a, b) => (a < b ? -1 : 1));
    return { seq: m.seq, files: m.names.map((f) => [f, m.files.get(f)!] as const) };
  };

  /**
   * Apply this process's commits after the mirror's seq, up to `seq`, as long as they follow each
   * other; how many were applied (0: the catalog went back, or the next commit is not ours).
   */
  const advanceMirror = (m: Mirror, seq: number): number => {
    if (seq < m.seq) return 0;
    let applied = 0;
    for (let s = m.seq + 1; s <= seq && ownCommits.has(s); s++) {
      const [filename, json] = ownCommits.get(s)!;
      if (!m.files.has(filename)) m.names = undefined;
      m.files.set(filename, json);
      ownCommits.delete(s);
      m.seq = s;
      applied++;
    }
    return applied;
  };

  const step = async () => {
    const checked = checkClaims;
    checkClaims = [];
    const all = checkAll;
    const verify = verifyOwn;
    checkAll = false;
    verifyOwn = false;
    try {
      if (all || verify || checked.length > 0) {
        const seq = await catalog.seq();
        // Unless asked to look (start, period, a raced write), trust what this process wrote.
        if (all || verify || seq > written) {
          const stored = (await readManifest(store))?.seq ?? -1;
          // Behind the catalog: whoever committed died before writing it (or is about to). After
          // a raced write (verify) whose snapshot is still the one in the store, ours may have
          // landed over a newer manifest whose writer has removed its claims and will not look
          // again: take over too. (A newer manifest in the store is its writer's to verify.)
          const oursLanded = verify && stored === written;
          if ((all || oursLanded || checked.length > 0) && stored < seq && seq > own) own = seq;
          written = stored;
          // Ahead of the catalog: the catalog was started afresh (Redis lost its data). The
          // manifest is left as it is until this process publishes; then it mirrors the catalog.
          if (stored > seq) {
            catalogReset = true;
            mirror = undefined;
          }
        }
      }
      // A periodic or start-up check re-reads the whole catalog on the next write: whatever
      // happened to it meanwhile (Redis restarted on older data), the mirror is rebuilt from it.
      if (all) mirror = undefined;
      if (own > written) {
        const started = performance.now();
        const at = await currentCatalog();
        await store.put(MANIFEST_KEY, renderManifest(at.seq, new Date(), at.files), 'application/json');
        written = at.seq;
        windowMs = Math.min(maxCoalesceMs, Math.max(coalesceMs, 4 * (performance.now() - started)));
        // Others committed meanwhile and may write an older snapshot over ours: look again soon.
        // Commits all known to be our own need no look (nobody else writes for them).
        const now = await catalog.seq();
        for (let seq = at.seq + 1; seq <= now && !verifyOwn; seq++) if (!ownCommits.has(seq)) verifyOwn = true;
      }
    } catch (err) {
      checkClaims.push(...checked);
      checkAll ||= all;
      verifyOwn ||= verify;
      throw err;
    }
    await removeClaims(checked.map((path) => ({ seq: 0, path })));
    await afterWrite();
  };

  const run = (): Promise<void> =>
    (running ??= (async () => {
      try {
        await step();
        failures = 0;
      } catch (err) {
        failures++;
        log.warn({ err: { message: (err as Error).message }, attempt: failures }, 'could not write the manifest; will retry');
      } finally {
        running = undefined;
      }
      if (own > written || checkAll || verifyOwn || checkClaims.length > 0) {
        schedule(failures ? Math.min(250 * 2 ** failures, MAX_RETRY_MS) : windowMs);
      }
    })());

  /** Something to write: within the window. */
  const kick = () => {
    if (timer || running) return;
    schedule(windowMs);
  };

  const periodic = setInterval(() => {
    checkAll = true;
    schedule(0);
  }, opts.checkEveryMs ?? 10_000);
  periodic.unref();
  // Once at start: a previous process may have died between a commit and the manifest.
  checkAll = true;
  schedule(coalesceMs);

  return {
    committed(seq, filename, evicted, claim, entry) {
      if (catalogReset) {
        // The catalog started afresh (Redis lost its data): its seqs start again too. Claims of
        // commits from before stay in .processing; recovery publishes them into the new catalog.
        catalogReset = false;
        written = -1;
        own = seq;
      }
      if (seq > own) own = seq;
      if (entry && entry.filename === filename && !(mirror && seq <= mirror.seq)) ownCommits.set(seq, [filename, JSON.stringify(entry)]);
      for (const sha256 of evicted) deletes.push({ seq, filename, sha256 });
      claims.push(entry?.size !== undefined ? { seq, path: claim, bytes: entry.size } : { seq, path: claim });
      kick();
    },
    check(claim) {
      checkClaims.push(claim);
      kick();
    },
    async flush() {
      for (let i = 0; i < 5; i++) {
        if (timer) clearTimeout(timer);
        timer = undefined;
        await running;
        await run();
        if (own <= written && !checkAll && !verifyOwn && claims.length === 0 && checkClaims.length === 0) return;
        if (failures > 0) break;
      }
      throw new Error(`the manifest could not be written; ${claims.length + checkClaims.length} claims stay in .processing until it is`);
    },
    pending: () => claims.length + checkClaims.length,
    close() {
      closed = true;
      clearInterval(periodic);
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}
