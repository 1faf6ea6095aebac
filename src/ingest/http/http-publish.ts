/**
 * The ingest side of PUT /v1/data/{filename} (the reader's PublishPort, src/ports/publish.ts):
 * an upload goes through the pipeline a drop takes. Its bytes are staged in the store
 * (staged.ts: readers mount no inbox), a claim job marked `staged` is queued, and the outcome is
 * awaited with one QueueEvents per process: a worker settles it with the same publish step as a
 * folder drop (validation, generated_at stamping, newest wins, REJECTED_DIR), so ordering and
 * crash safety are the queue's. The QueueEvents reads every event of the queue, drops' included,
 * so it runs only while uploads wait for outcomes (and a while after), reading on from the
 * stream's last entry when it opens, so no outcome between opening and listening is missed. A
 * dry run is checked here, with the same check (large ones off the serving loop, checker.ts) and
 * the same rule against the published version (decide.ts), and writes nothing.
 *
 * Loaded by service.ts with import() only where the reader takes PUTs (publish.http): it loads
 * BullMQ and the document validator.
 */
import type { QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Catalog } from '../../catalog/redis-catalog.js';
import type { Config } from '../../config.js';
import { RejectionError } from '../../errors.js';
import { parseFilename, type FeedRegistry } from '../../feeds/registry.js';
import { loadDocumentSchema } from '../../feeds/validate.js';
import { createDropChecker, defaultValidateThreads } from '../publish/checker.js';
import type { Logger } from '../../log.js';
import type { DryRunOutcome, PublishOutcome, PublishPort } from '../../ports/publish.js';
import type { Store } from '../../store/store.js';
import { decideAgainst } from '../publish/decide.js';
import { newClaimId } from '../drop-folder/inbox.js';
import { enqueueClaim, type IngestQueue, type IngestResult } from '../queue.js';
import { createOutcomeEvents } from './outcome-events.js';
import { stagedKey } from './staged.js';
import { withTimeout } from '../../timeout.js';

export interface HttpPublisherDeps {
  readonly config: Pick<Config, 'limits' | 'publish' | 'redis' | 'ingest'>;
  readonly queue: IngestQueue;
  /** The connection the QueueEvents copies for its blocking reads (and reads the stream's last entry with). */
  readonly eventsConnection: Redis;
  readonly store: Store;
  readonly catalog: Catalog;
  readonly registry: FeedRegistry;
  readonly log: Logger;
}

export interface HttpPublisher extends PublishPort {
  close(): Promise<void>;
}

export async function startHttpPublisher(deps: HttpPublisherDeps): Promise<HttpPublisher> {
  const { config, queue, store, catalog, registry, log } = deps;
  const outcomes = createOutcomeEvents(deps.eventsConnection, config.redis.prefix, log);
  // Dry runs check on a thread, started on demand (a 50 MB upload's check would hold the serving
  // loop for most of a second); with none, the validator is compiled here, not on the first dry
  // run: the compile holds the event loop for tens of milliseconds.
  const checkDrop = createDropChecker({
    limits: config.limits,
    schema: loadDocumentSchema(),
    threads: config.ingest.validateThreads ?? defaultValidateThreads(true),
    onDemand: true,
  });

  const submit = async (filename: string, bytes: Buffer, receivedAt: Date, mayQueue?: () => boolean): Promise<PublishOutcome> => {
    const claimId = newClaimId(receivedAt);
    const key = stagedKey(claimId, filename);
    // Not durable: until its outcome the upload is acknowledged to no one (a publisher whose PUT
    // gets no answer sends it again). Made durable before answering that it is still pending.
    await store.put(key, bytes, 'application/json', { durable: false });
    // The last moment the upload can be withdrawn: once queued, a worker settles it.
    if (mayQueue && !mayQueue()) {
      await store.delete(key).catch(() => undefined); // else the sweep removes it
      return { outcome: 'withdrawn' };
    }
    // Listening before the job is queued: its outcome cannot come before the reading starts.
    // Bounded: while Redis is away its client holds commands until it reconnects, and the
    // publisher is owed an answer (503) rather than a wait of unknown length.
    const queuing = (async () => {
      const events = await outcomes.acquire();
      try {
        return { events, job: await enqueueClaim(queue, claimId, filename, receivedAt.getTime(), true) };
      } catch (err) {
        outcomes.release();
        throw err;
      }
    })();
    let events: QueueEvents;
    let job;
    try {
      ({ events, job } = await withTimeout(queuing, config.publish.queueTimeoutMs, 'queueing the upload'));
    } catch (err) {
      // Queued late (Redis back): that job finds no staged bytes and settles nothing.
      queuing.then(
        () => outcomes.release(),
        () => undefined,
      );
      await store.delete(key).catch(() => undefined); // else the sweep removes it
      throw err;
    }
    let r: IngestResult;
    try {
      r = await job.waitUntilFinished(events, config.publish.settleTimeoutMs);
    } catch (err) {
      // Not settled in time: the job stays queued and a worker settles it.
      if (!/timed out/i.test((err as Error).message)) throw err;
      // "It will be settled": the staged bytes must survive a crash from now on. (Settled and
      // removed meanwhile, the object put again is swept.)
      await store.put(key, bytes, 'application/json');
      return { outcome: 'pending' };
    } finally {
      outcomes.release();
    }
    return outcomeOf(r);
  };

  const check = async (filename: string, bytes: Buffer, receivedAt: Date): Promise<DryRunOutcome> => {
    const feed = parseFilename(registry, filename);
    if (!feed) return { outcome: 'rejected', reason: 'unknown_filename', detail: `"${filename}" is not a feed filename of the registry` };
    const currentP = withTimeout(catalog.get(feed.filename), config.publish.queueTimeoutMs, 'reading the published version');
    currentP.catch(() => undefined); // awaited below
    let checked;
    try {
      checked = await checkDrop({ feed, bookmaker: registry.bookmakers.get(feed.bookmaker)!, bytes, receivedAt, now: new Date() });
    } catch (err) {
      if (err instanceof RejectionError) return { outcome: 'rejected', reason: err.reason, detail: err.detail };
      throw err;
    }
    const { doc, sha256, sourceSha256 } = checked;
    const current = await currentP;
    const would = decideAgainst(current, { sha256, sourceSha256, generatedAtMs: doc.generatedAtMs }) ?? 'published';
    return {
      outcome: 'valid',
      would,
      generatedAt: doc.generatedAt,
      current: current ? { sha256: current.sha256, generatedAt: current.generatedAt } : undefined,
    };
  };

  return {
    submit,
    check,
    async close() {
      await outcomes.close();
      await checkDrop.close();
    },
  };
}

function outcomeOf(r: IngestResult): PublishOutcome {
  switch (r.outcome) {
    case 'published':
    case 'unchanged':
    case 'superseded':
      if (r.sha256 && r.generatedAt && r.current) return { outcome: r.outcome, sha256: r.sha256, generatedAt: r.generatedAt, current: r.current };
      break;
    case 'rejected':
      return { outcome: 'rejected', reason: r.reason ?? 'unknown', detail: r.detail ?? '', rejectionId: r.rejectionId };
  }
  throw new Error(`the upload's job ended ${r.outcome} without settling it`);
}
