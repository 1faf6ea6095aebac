/**
 * The publish step: one claimed drop in, one settled outcome out. Reject (moved to REJECTED_DIR),
 * superseded, unchanged, or published: the version object is written first, then the catalog is
 * committed (newest wins, atomically in Redis), then the manifest follows and old versions go.
 * The claim is removed only after the outcome is durable.
 */
import { createHash } from 'node:crypto';
import { unlink } from 'node:fs/promises';
import type { Config } from '../config.js';
import type { Catalog } from '../catalog/redis-catalog.js';
import { syncManifest } from '../catalog/manifest.js';
import type { CatalogEntry, CommitOutcome } from '../catalog/types.js';
import { RejectionError, type RejectionReason } from '../errors.js';
import { parseFilename, type FeedRegistry } from '../feeds/registry.js';
import type { DocumentValidator } from '../feeds/validate.js';
import type { Logger } from '../log.js';
import { objectKey, type Store } from '../store/store.js';
import { readClaim, type Claim } from './inbox.js';
import { rejectionId, writeRejection, type RejectionRecord } from './rejected.js';

export type DropOutcome = CommitOutcome | 'rejected';

export interface DropResult {
  readonly outcome: DropOutcome;
  readonly filename: string;
  readonly reason?: RejectionReason;
  readonly detail?: string;
  readonly rejectionId?: string;
  readonly sha256?: string;
  readonly generatedAt?: string;
  /** Milliseconds spent reading, validating, writing the store and committing. */
  readonly timings: Readonly<Record<string, number>>;
}

export interface PublisherDeps {
  readonly config: Pick<Config, 'limits' | 'rejectedDir' | 'ingest'>;
  readonly registry: FeedRegistry;
  readonly validate: DocumentValidator;
  readonly store: Store;
  readonly catalog: Catalog;
  readonly log: Logger;
  /** Remember a rejection for `status` (best effort). */
  readonly recordRejection?: (record: RejectionRecord) => Promise<void>;
  readonly now?: () => Date;
}

export type Publisher = (claim: Claim, receivedAt: Date) => Promise<DropResult>;

export function createPublisher(deps: PublisherDeps): Publisher {
  const now = deps.now ?? (() => new Date());
  return async (claim, receivedAt) => {
    const t0 = performance.now();
    const timings: Record<string, number> = {};
    const lap = (name: string, since: number) => {
      timings[name] = Math.round((performance.now() - since) * 100) / 100;
      return performance.now();
    };
    try {
      const feed = parseFilename(deps.registry, claim.name);
      if (!feed) throw new RejectionError('unknown_filename', `"${claim.name}" is not a feed filename of the registry`);
      const bookmaker = deps.registry.bookmakers.get(feed.bookmaker)!;
      const raw = await readClaim(claim.path, deps.config.limits.maxFileBytes);
      let t = lap('read', t0);
      const doc = deps.validate({ feed, bookmaker, bytes: raw, receivedAt, now: now() });
      const sha256 = createHash('sha256').update(doc.bytes).digest('hex');
      t = lap('validate', t);

      const current = await deps.catalog.get(feed.filename);
      let outcome: CommitOutcome;
      if (current?.sha256 === sha256) outcome = 'unchanged';
      else if (current && current.generatedAtMs > doc.generatedAtMs) outcome = 'superseded';
      else {
        const entry: CatalogEntry = {
          filename: feed.filename,
          bookmaker: feed.bookmaker,
          kind: feed.kind,
          sport: feed.sport,
          object: objectKey(feed.filename, sha256),
          sha256,
          size: doc.bytes.length,
          generatedAt: doc.generatedAt,
          generatedAtMs: doc.generatedAtMs,
          publishedAt: now().toISOString(),
        };
        await deps.store.put(entry.object, doc.bytes, 'application/json');
        t = lap('store', t);
        const result = await deps.catalog.commit(entry, deps.config.ingest.keepVersions);
        t = lap('commit', t);
        outcome = result.outcome;
        if (outcome === 'published') {
          await afterPublish(deps, result.current, result.evicted);
          t = lap('manifest', t);
        }
      }
      await unlink(claim.path).catch(ignoreMissing);
      timings.total = Math.round((performance.now() - t0) * 100) / 100;
      return { outcome, filename: claim.name, sha256, generatedAt: doc.generatedAt, timings };
    } catch (err) {
      if (!(err instanceof RejectionError)) throw err;
      const record: RejectionRecord = {
        id: rejectionId(receivedAt, claim.claimId),
        filename: claim.name,
        reason: err.reason,
        detail: err.detail,
        received_at: receivedAt.toISOString(),
      };
      await writeRejection(deps.config.rejectedDir, record, claim.path);
      await unlink(claim.path).catch(ignoreMissing);
      await deps.recordRejection?.(record).catch((e: unknown) => deps.log.warn({ err: e }, 'could not record the rejection in Redis'));
      timings.total = Math.round((performance.now() - t0) * 100) / 100;
      return { outcome: 'rejected', filename: claim.name, reason: err.reason, detail: err.detail, rejectionId: record.id, timings };
    }
  };
}

async function afterPublish(deps: PublisherDeps, current: CatalogEntry, evicted: readonly string[]): Promise<void> {
  await syncManifest(deps.catalog, deps.store);
  if (evicted.length === 0) return;
  // A version may have been republished since it was evicted: never delete what is current.
  const latest = await deps.catalog.get(current.filename);
  for (const sha of evicted) {
    if (sha === latest?.sha256) continue;
    await deps.store.delete(objectKey(current.filename, sha)).catch((err: unknown) =>
      deps.log.warn({ err, filename: current.filename, sha }, 'could not delete an old version'),
    );
  }
}

function ignoreMissing(err: NodeJS.ErrnoException): void {
  if (err.code !== 'ENOENT') throw err;
}
