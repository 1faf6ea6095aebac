/**
 * The publish step: one claimed drop in, one settled outcome out. Reject (moved to REJECTED_DIR),
 * superseded, unchanged, or published: the version object is written first, then the catalog is
 * committed (newest wins, atomically in Redis). The claim is removed only after the outcome is
 * durable: for a publication, once manifest.json covers it. The manifest is written in the
 * background, one write for every commit made meanwhile, and evicted versions are deleted after it
 * (manifest-sync.ts).
 */
import { unlink } from 'node:fs/promises';
import type { CatalogEntry, CommitOutcome } from '../../catalog/types.js';
import { RejectionError } from '../../errors.js';
import { parseFilename, type FeedInfo } from '../../feeds/registry.js';
import type { ValidDocument } from '../../feeds/validate.js';
import { objectKey } from '../../store/store.js';
import type { DropResult, Publisher, PublisherDeps } from './publisher-types.js';
import type { Claim, ClaimRead } from '../drop-folder/inbox.js';
import { seenClaim, writtenSince, type SeenClaim } from '../drop-folder/written-since.js';
import { decideAgainst } from './decide.js';
import { createManifestWriter, type ManifestWriter } from '../background/manifest-sync.js';
import { parkRejectedClaim, rejectionId, writeRejection, type RejectionRecord } from '../rejections/rejected.js';
import { readSettled, SettledRejection } from '../drop-folder/settle.js';
import { createByteBudget, withinBudget } from './byte-budget.js';
import { createLaps, type Laps } from './laps.js';
import { ifExists } from '../../missing.js';

export function createPublisher(deps: PublisherDeps): Publisher {
  const ctx: PublishContext = {
    deps,
    now: deps.now ?? (() => new Date()),
    manifest: createManifestWriter({
      catalog: deps.catalog,
      store: deps.store,
      log: deps.log,
      syncIoMaxBytes: deps.config.ingest.syncIoMaxBytes,
      ...(deps.onCatalogBehind ? { onCatalogBehind: deps.onCatalogBehind } : {}),
    }),
  };
  // One maximal document's worth of bytes read and validated at a time (byte-budget.ts).
  const budget = createByteBudget(Math.max(deps.config.limits.maxFileBytes, 8 * 1024 * 1024));
  const publish = (claim: Claim, receivedAt: Date): Promise<DropResult> => withinBudget(budget, (hold) => publishWithin(ctx, claim, receivedAt, hold));
  return Object.assign(publish, { flush: () => ctx.manifest.flush(), close: () => ctx.manifest.close() });
}

interface PublishContext {
  readonly deps: PublisherDeps;
  readonly now: () => Date;
  readonly manifest: ManifestWriter;
}

/**
 * One drop, from its claim to its outcome; `hold` takes its bytes' share of the budget. A claim
 * written again while it was processed (a writer holding it open, rewriting in place) holds newer
 * content than the outcome was decided on: it is processed again, until it is unchanged after its
 * outcome (or for `ingest.settle_max`; then its claim stays for recovery), so that the newest
 * complete content is always the one published, or rejected with its reason.
 */
async function publishWithin(ctx: PublishContext, claim: Claim, receivedAt: Date, hold: (size: number) => Promise<void>): Promise<DropResult> {
  const { config, log } = ctx.deps;
  const deadline = Date.now() + config.ingest.settleMaxMs;
  for (;;) {
    const { result, seen, held } = await settleOnce(ctx, claim, receivedAt, hold);
    if (seen === undefined) return result;
    const again = await writtenSince(claim.path, seen, config.ingest.syncIoMaxBytes, held);
    if (!again) {
      // Removed only now, unchanged since it was read (a published or unchanged drop's claim goes
      // after the manifest, which checks the same).
      if (result.outcome === 'superseded') await ifExists(unlink(claim.path));
      return result;
    }
    if (Date.now() >= deadline) {
      log.warn(
        { filename: claim.name, claimId: claim.claimId },
        'a drop is still being rewritten in place after ingest.settle_max: its claim stays, processed again once quiet',
      );
      return result;
    }
    log.info(
      { filename: claim.name, claimId: claim.claimId, outcome: result.outcome },
      'the drop was written again while it was processed: processing it again',
    );
  }
}

/** One pass over the claim: its outcome, and what was read of it (none for a rejection: parked, late-writes.ts). */
async function settleOnce(
  ctx: PublishContext,
  claim: Claim,
  receivedAt: Date,
  hold: (size: number) => Promise<void>,
): Promise<{ result: DropResult; seen: SeenClaim | undefined; held?: Buffer }> {
  const t0 = performance.now();
  const laps = createLaps();
  try {
    const drop = await readDrop(ctx, claim, receivedAt, hold, laps, t0);
    const settled: Settled = drop.early
      ? { outcome: drop.early, current: drop.current, winner: drop.early === 'superseded' ? drop.current!.generatedAt : undefined, carriedTo: undefined }
      : await commitDrop(ctx, claim, drop, laps);
    const { outcome, current, winner, carriedTo } = settled;
    if (outcome === 'unchanged') {
      // Maybe committed by an attempt that died before the manifest: the claim goes after a check.
      ctx.manifest.check({ path: claim.path, seen: drop.seen, held: drop.received });
    } else if (outcome === 'superseded') {
      const record = { filename: claim.name, generated_at: drop.doc.generatedAt, published_generated_at: winner!, received_at: receivedAt.toISOString() };
      await ctx.deps.recordSuperseded?.(record).catch((e: unknown) => ctx.deps.log.warn({ err: e }, 'could not record the superseded drop in Redis'));
    }
    laps.set('total', t0, performance.now());
    const result: DropResult = {
      outcome,
      filename: claim.name,
      sha256: drop.sha256,
      generatedAt: drop.doc.generatedAt,
      ...(winner !== undefined ? { publishedGeneratedAt: winner } : {}),
      ...(current ? { current: { sha256: current.sha256, generatedAt: current.generatedAt } } : {}),
      timings: laps.timings,
      ...(carriedTo !== undefined ? { carriedTo } : {}),
    };
    return { result, seen: drop.seen, held: drop.received };
  } catch (err) {
    if (!(err instanceof RejectionError)) throw err;
    return { result: await rejectDrop(ctx, claim, receivedAt, err, laps, t0), seen: undefined };
  }
}

interface ReadDrop {
  readonly feed: FeedInfo;
  readonly doc: ValidDocument;
  readonly sha256: string;
  /** The bytes as dropped, when the document was stamped (its generated_at added). */
  readonly sourceSha256: string | undefined;
  /** The published entry under the filename. */
  readonly current: CatalogEntry | undefined;
  /** The outcome already decided against it (unchanged, superseded), or none: commit. */
  readonly early: CommitOutcome | undefined;
  /** When validation ended (the store lap starts there). */
  readonly validatedAt: number;
  /** What was read of the claim (to tell whether it is written again), and its bytes as read. */
  readonly seen: SeenClaim;
  readonly received: Buffer;
}

/** Reads and validates the drop, and decides what it can against the published entry. */
async function readDrop(ctx: PublishContext, claim: Claim, receivedAt: Date, hold: (size: number) => Promise<void>, laps: Laps, t0: number): Promise<ReadDrop> {
  const { deps } = ctx;
  const feed = parseFilename(deps.registry, claim.name);
  if (!feed) throw new RejectionError('unknown_filename', `"${claim.name}" is not a feed filename of the registry`);
  const bookmaker = deps.registry.bookmakers.get(feed.bookmaker)!;
  // The published entry, read while the drop is read and validated. Only the fast path's
  // decision (unchanged, superseded) uses it; the commit's script decides newest-wins again.
  const currentP = deps.catalog.get(feed.filename);
  currentP.catch(() => undefined); // awaited below; a failure must not go unhandled meanwhile
  let readAt = t0;
  let received: Buffer = Buffer.alloc(0);
  let read: ClaimRead | undefined;
  const { doc, sha256, sourceSha256 } = await readSettled(
    claim.path,
    deps.config,
    hold,
    (raw, r) => {
      readAt = performance.now();
      received = raw;
      read = r;
      return deps.check({ feed, bookmaker, bytes: raw, receivedAt, now: ctx.now() });
    },
    claim.complete === true,
    deps.check.sharedMinBytes,
  );
  laps.set('read', t0, readAt);
  const validatedAt = laps.lap('validate', readAt);
  const current = await currentP;
  const early = decideAgainst(current, { sha256, sourceSha256, generatedAtMs: doc.generatedAtMs });
  return { feed, doc, sha256, sourceSha256, current, early, validatedAt, seen: seenClaim(read!, sourceSha256 ?? sha256), received };
}

interface Settled {
  readonly outcome: CommitOutcome;
  /** The version published under the filename once settled. */
  readonly current: CatalogEntry | undefined;
  /** Superseded: the generated_at that won (the published entry's). */
  readonly winner: string | undefined;
  readonly carriedTo: number | undefined;
}

/** Writes the version object (carrying its bytes meanwhile), then commits it to the catalog. */
async function commitDrop(ctx: PublishContext, claim: Claim, drop: ReadDrop, laps: Laps): Promise<Settled> {
  const { deps, manifest } = ctx;
  const { feed, doc, sha256, sourceSha256 } = drop;
  let t = drop.validatedAt;
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
    publishedAt: ctx.now().toISOString(),
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
  t = laps.lap('store', t);
  if (deps.onPublishing) {
    try {
      deps.onPublishing(sha256, doc.bytes);
    } catch (err) {
      deps.log.warn({ err: { message: (err as Error)?.message }, filename: feed.filename }, 'the onPublishing hook failed; ignored');
    }
  }
  const result = await deps.catalog.commit(entry, deps.config.ingest.keepVersions);
  laps.lap('commit', t);
  if (result.behind) manifest.wentBack(result.seq);
  const carriedTo = await carried;
  if (result.outcome === 'published') {
    if (deps.onPublished) {
      try {
        deps.onPublished(entry, result.seq, doc.bytes);
      } catch (err) {
        deps.log.warn({ err: { message: (err as Error)?.message }, filename: feed.filename }, 'the onPublished hook failed; ignored');
      }
    }
    // The claim goes once a manifest covering this commit is written (manifest-sync.ts).
    manifest.committed(result.seq, feed.filename, result.evicted, { path: claim.path, seen: drop.seen, held: drop.received }, entry, result.history);
  }
  const winner = result.outcome === 'superseded' ? result.current.generatedAt : undefined;
  return { outcome: result.outcome, current: result.current, winner, carriedTo };
}

/** A rejected drop: recorded in REJECTED_DIR (and Redis, for `status`), its claim parked or removed. */
async function rejectDrop(ctx: PublishContext, claim: Claim, receivedAt: Date, err: RejectionError, laps: Laps, t0: number): Promise<DropResult> {
  const { deps } = ctx;
  const record: RejectionRecord = {
    id: rejectionId(receivedAt, claim.claimId),
    filename: claim.name,
    reason: err.reason,
    detail: err.detail,
    received_at: receivedAt.toISOString(),
  };
  // Bytes that were read are kept as judged, and the claim is parked, watched for late writes
  // (late-writes.ts), unless it was whole when claimed (an upload: nobody writes to it); anything
  // else (too large, not a regular file) is kept as it is.
  const judged = err instanceof SettledRejection ? err.bytes : undefined;
  await writeRejection(deps.config.rejectedDir, record, claim.path, judged);
  if (judged && claim.complete !== true) await parkRejectedClaim(deps.config.inboxDir, claim.path, record.id);
  else await ifExists(unlink(claim.path));
  await deps.recordRejection?.(record).catch((e: unknown) => deps.log.warn({ err: e }, 'could not record the rejection in Redis'));
  laps.set('total', t0, performance.now());
  return { outcome: 'rejected', filename: claim.name, reason: err.reason, detail: err.detail, rejectionId: record.id, timings: laps.timings };
}
