/**
 * The publish step: one claimed drop in, one settled outcome out. Reject (moved to REJECTED_DIR),
 * superseded, unchanged, or published: the version object is written first, then the catalog is
 * committed (newest wins, atomically in Redis). The claim is removed only after the outcome is
 * durable: for a publication, once manifest.json covers it. The manifest is written in the
 * background, one write for every commit made meanwhile, and evicted versions are deleted after it
 * (manifest-sync.ts).
 */
import { createHash } from 'node:crypto';
import { unlink } from 'node:fs/promises';
import type { Config } from '../../config.js';
import type { Catalog } from '../../catalog/redis-catalog.js';
import type { CatalogEntry, CommitOutcome } from '../../catalog/types.js';
import { RejectionError, type RejectionReason } from '../../errors.js';
import { parseFilename, type FeedRegistry } from '../../feeds/registry.js';
import type { DocumentValidator } from '../../feeds/validate.js';
import type { Logger } from '../../log.js';
import { objectKey, type Store } from '../../store/store.js';
import type { CarryPolicy } from './carry.js';
import type { Claim } from '../drop-folder/inbox.js';
import { decideAgainst } from './decide.js';
import { createManifestWriter } from '../background/manifest-sync.js';
import { parkRejectedClaim, rejectionId, writeRejection, type RejectionRecord } from '../rejections/rejected.js';
import { readSettled, SettledRejection } from '../drop-folder/settle.js';
import type { SupersededRecord } from '../rejections/superseded-log.js';

export type DropOutcome = CommitOutcome | 'rejected';

export interface DropResult {
  readonly outcome: DropOutcome;
  readonly filename: string;
  readonly reason?: RejectionReason;
  readonly detail?: string;
  readonly rejectionId?: string;
  readonly sha256?: string;
  readonly generatedAt?: string;
  /** Superseded: the generated_at of the published version that won over this drop. */
  readonly publishedGeneratedAt?: string;
  /** The version published under the filename once settled: this drop's, or the one it is unchanged from or superseded by. */
  readonly current?: { readonly sha256: string; readonly generatedAt: string };
  /** Milliseconds spent reading, validating, writing the store and committing. */
  readonly timings: Readonly<Record<string, number>>;
  /** Its bytes were carried to readers in other processes (carried.ts): how many received them. */
  readonly carriedTo?: number;
}

export interface PublisherDeps {
  readonly config: Pick<Config, 'limits' | 'rejectedDir' | 'inboxDir' | 'ingest'>;
  readonly registry: FeedRegistry;
  readonly validate: DocumentValidator;
  readonly store: Store;
  readonly catalog: Catalog;
  readonly log: Logger;
  /** Remember a rejection for `status` (best effort). */
  readonly recordRejection?: (record: RejectionRecord) => Promise<void>;
  /** Remember a superseded drop and the generated_at that won, for `status` (best effort). */
  readonly recordSuperseded?: (record: SupersededRecord) => Promise<void>;
  readonly now?: () => Date;
  /**
   * Called synchronously right after a commit whose outcome is `published` (before the manifest
   * covers it), with the exact bytes written to the store under `entry.object`. Must not keep the
   * publish waiting; whatever it throws is logged and ignored.
   */
  readonly onPublished?: (entry: CatalogEntry, seq: number, bytes: Buffer) => void;
  /** Which versions are carried to readers in other processes ahead of their commit (carry.ts); none without it. */
  readonly carry?: CarryPolicy;
}

export interface Publisher {
  (claim: Claim, receivedAt: Date): Promise<DropResult>;
  /**
   * Write manifest.json now and remove the claims waiting for it (a published drop's claim goes
   * once a manifest covering it is in the store, written in the background).
   */
  flush(): Promise<void>;
  /** Stop the background manifest writer's timers. */
  close(): void;
}

export function createPublisher(deps: PublisherDeps): Publisher {
  const now = deps.now ?? (() => new Date());
  const manifest = createManifestWriter({
    catalog: deps.catalog,
    store: deps.store,
    log: deps.log,
    syncIoMaxBytes: deps.config.ingest.syncIoMaxBytes,
  });
  // Drops are read and validated within a byte budget of one maximal document, so memory stays
  // bounded whatever the concurrency: small drops run side by side, large ones one at a time. (The
  // one-pass check costs little beyond the bytes themselves; JSON.parse + ajv, still used for a
  // schema it does not support, about 4.7 times a drop's size: four 45 MB drops at once took a
  // process to 893 MB RSS before this budget.)
  // The budget is taken once the claim is open and its size known (its fstat), before reading it,
  // and held until the drop is settled.
  const budget = createByteBudget(Math.max(deps.config.limits.maxFileBytes, 8 * 1024 * 1024));
  const publish = async (claim: Claim, receivedAt: Date): Promise<DropResult> => {
    let held = 0;
    const hold = async (size: number) => {
      if (size === held) return;
      // Re-read at another size (a drop written in place): give back, then wait for the new size.
      budget.release(held);
      held = 0;
      await budget.acquire(size);
      held = size;
    };
    try {
      return await publishWithin(claim, receivedAt, hold);
    } finally {
      budget.release(held);
    }
  };
  const publishWithin = async (claim: Claim, receivedAt: Date, hold: (size: number) => Promise<void>): Promise<DropResult> => {
    const t0 = performance.now();
    const timings: Record<string, number> = {};
    const lap = (name: string, since: number) => {
      const t = performance.now();
      timings[name] = Math.round((t - since) * 100) / 100;
      return t;
    };
    try {
      const feed = parseFilename(deps.registry, claim.name);
      if (!feed) throw new RejectionError('unknown_filename', `"${claim.name}" is not a feed filename of the registry`);
      const bookmaker = deps.registry.bookmakers.get(feed.bookmaker)!;
      // The published entry, read while the drop is read and validated. Only the fast path's
      // decision (unchanged, superseded) uses it; the commit's script decides newest-wins again.
      const currentP = deps.catalog.get(feed.filename);
      currentP.catch(() => undefined); // awaited below; a failure must not go unhandled meanwhile
      let readAt = t0;
      let received: Buffer = Buffer.alloc(0);
      const doc = await readSettled(claim.path, deps.config, hold, (raw) => {
        readAt = performance.now();
        received = raw;
        return deps.validate({ feed, bookmaker, bytes: raw, receivedAt, now: now() });
      });
      timings.read = Math.round((readAt - t0) * 100) / 100;
      const sha256 = sha256Of(doc.bytes);
      const sourceSha256 = doc.stamped ? sha256Of(received) : undefined;
      let t = lap('validate', readAt);

      let current = await currentP;
      let outcome: CommitOutcome;
      let carriedTo: number | undefined;
      // Superseded: the generated_at that won (the published entry's).
      let winner: string | undefined;
      const early = decideAgainst(current, { sha256, sourceSha256, generatedAtMs: doc.generatedAtMs });
      if (early) {
        outcome = early;
        if (early === 'superseded') winner = current!.generatedAt;
      } else {
        const entry: CatalogEntry = {
          filename: feed.filename,
          bookmaker: feed.bookmaker,
          kind: feed.kind,
          sport: feed.sport,
          object: objectKey(feed.filename, sha256),
          sha256,
          ...(sourceSha256 !== undefined ? { sourceSha256 } : {}),
          size: doc.bytes.length,
          generatedAt: doc.generatedAt,
          generatedAtMs: doc.generatedAtMs,
          publishedAt: now().toISOString(),
        };
        // The store write starts first (a filesystem store's write to the page cache happens in
        // this call, only its fsyncs are awaited), then the bytes are carried while it runs, on the
        // connection the commit follows on, so readers have them before the announcement (carried.ts).
        const put = deps.store.put(entry.object, doc.bytes, 'application/json');
        put.catch(() => undefined); // awaited below; a failure must not go unhandled meanwhile
        const carry = deps.carry;
        const carried = carry?.take(doc.bytes.length)
          ? deps.catalog.carry(sha256, doc.bytes).then(
              (n) => {
                carry.delivered(n);
                return n;
              },
              () => undefined, // only an optimisation: the readers read the store instead
            )
          : undefined;
        await put;
        t = lap('store', t);
        const result = await deps.catalog.commit(entry, deps.config.ingest.keepVersions);
        lap('commit', t);
        carriedTo = await carried;
        outcome = result.outcome;
        if (outcome === 'superseded') winner = result.current.generatedAt;
        current = result.current;
        if (outcome === 'published') {
          if (deps.onPublished) {
            try {
              deps.onPublished(entry, result.seq, doc.bytes);
            } catch (err) {
              deps.log.warn({ err: { message: (err as Error)?.message }, filename: feed.filename }, 'the onPublished hook failed; ignored');
            }
          }
          // The claim goes once a manifest covering this commit is written (manifest-sync.ts).
          manifest.committed(result.seq, feed.filename, result.evicted, claim.path, entry, result.history);
        }
      }
      if (outcome === 'unchanged') {
        // Maybe committed by an attempt that died before the manifest: the claim goes after a check.
        manifest.check(claim.path);
      } else if (outcome === 'superseded') {
        await unlink(claim.path).catch(ignoreMissing);
        const record = { filename: claim.name, generated_at: doc.generatedAt, published_generated_at: winner!, received_at: receivedAt.toISOString() };
        await deps.recordSuperseded?.(record).catch((e: unknown) => deps.log.warn({ err: e }, 'could not record the superseded drop in Redis'));
      }
      timings.total = Math.round((performance.now() - t0) * 100) / 100;
      return {
        outcome,
        filename: claim.name,
        sha256,
        generatedAt: doc.generatedAt,
        ...(winner !== undefined ? { publishedGeneratedAt: winner } : {}),
        ...(current ? { current: { sha256: current.sha256, generatedAt: current.generatedAt } } : {}),
        timings,
        ...(carriedTo !== undefined ? { carriedTo } : {}),
      };
    } catch (err) {
      if (!(err instanceof RejectionError)) throw err;
      const record: RejectionRecord = {
        id: rejectionId(receivedAt, claim.claimId),
        filename: claim.name,
        reason: err.reason,
        detail: err.detail,
        received_at: receivedAt.toISOString(),
      };
      // Bytes that were read are kept as judged, and the claim is parked, watched for late writes
      // (late-writes.ts); anything else (too large, not a regular file) is kept as it is.
      const judged = err instanceof SettledRejection ? err.bytes : undefined;
      await writeRejection(deps.config.rejectedDir, record, claim.path, judged);
      if (judged) await parkRejectedClaim(deps.config.inboxDir, claim.path, record.id);
      else await unlink(claim.path).catch(ignoreMissing);
      await deps.recordRejection?.(record).catch((e: unknown) => deps.log.warn({ err: e }, 'could not record the rejection in Redis'));
      timings.total = Math.round((performance.now() - t0) * 100) / 100;
      return { outcome: 'rejected', filename: claim.name, reason: err.reason, detail: err.detail, rejectionId: record.id, timings };
    }
  };
  return Object.assign(publish, { flush: () => manifest.flush(), close: () => manifest.close() });
}

/** A counting semaphore over bytes, first come first served; a request over the limit counts as the limit. */
export function createByteBudget(limit: number): { acquire(bytes: number): Promise<void>; release(bytes: number): void; readonly used: number } {
  let used = 0;
  const waiting: { bytes: number; go: () => void }[] = [];
  const clamp = (bytes: number) => Math.min(Math.max(0, bytes), limit);
  return {
    get used() {
      return used;
    },
    acquire(bytes) {
      const n = clamp(bytes);
      if (waiting.length === 0 && used + n <= limit) {
        used += n;
        return Promise.resolve();
      }
      return new Promise<void>((go) => waiting.push({ bytes: n, go }));
    },
    release(bytes) {
      used -= clamp(bytes);
      while (waiting.length > 0 && used + waiting[0]!.bytes <= limit) {
        const next = waiting.shift()!;
        used += next.bytes;
        next.go();
      }
    },
  };
}

function sha256Of(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

function ignoreMissing(err: NodeJS.ErrnoException): void {
  if (err.code !== 'ENOENT') throw err;
}
