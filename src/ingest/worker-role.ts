/**
 * The worker role of `oddsfiles start`: validate and publish what the queue names, under a
 * supervisor. service.ts loads this module only in processes that run the role, so readers never
 * load ajv, the publisher or BullMQ's Worker.
 */
import { existsSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import type { Catalog } from '../catalog/redis-catalog.js';
import type { Config } from '../config.js';
import type { FeedRegistry } from '../feeds/registry.js';
import { loadDocumentSchema, onePassSupport } from '../feeds/validate.js';
import type { Job } from 'bullmq';
import type { Logger } from '../log.js';
import { createRedis } from '../redis/connect.js';
import type { RedisKeys } from '../redis/key-names.js';
import type { Store } from '../store/store.js';
import { createCarryPolicy } from './publish/carry.js';
import { createDropChecker, defaultValidateThreads } from './publish/checker.js';
import { CONTENTION_DEFAULTS } from './publish/core-contention.js';
import { ensureInbox } from './drop-folder/inbox.js';
import { startInboxRegistration } from './drop-folder/inbox-marker.js';
import { createPublisher } from './publish/publish.js';
import type { DropResult, PublisherDeps } from './publish/publisher-types.js';
import { startRejectedRetention } from './rejections/rejected-purge.js';
import { createRejectedBytes } from './rejections/rejected-bytes.js';
import { enqueueDrop, type IngestJobData, type IngestQueue, type IngestResult } from './queue.js';
import { createRejectionLog } from './rejections/rejection-log.js';
import { createSupersededLog } from './rejections/superseded-log.js';
import { sweepStaged } from './http/staged.js';
import { startRecoveryGuard } from './redis-recovery.js';
import { superviseWorker } from './supervisor.js';
import { createIngestWorker } from './worker.js';

export interface WorkerRoleDeps {
  readonly config: Config;
  readonly redisUrl: string;
  /** Command connection (rejection log). */
  readonly client: Redis;
  readonly keys: RedisKeys;
  readonly queue: IngestQueue;
  readonly store: Store;
  readonly catalog: Catalog;
  readonly registry: FeedRegistry;
  /** Told of every settled drop (the process's metrics). */
  readonly metrics: { jobSettled(result: DropResult, job: Job<IngestJobData, IngestResult>): void; dropChecked(on: 'thread' | 'loop'): void };
  readonly log: Logger;
  /** Told of each Redis connection the role opens (the service drops those Redis never answers on stop). */
  readonly onConnection?: ((connection: Redis) => void) | undefined;
  /** The reader role runs in this process too: its loop must stay free of the checks whatever the cores. */
  readonly servesReaders?: boolean;
  /** In one process the reader takes the bytes just published: no store read, no wait for the announcement. */
  readonly onPublished?: PublisherDeps['onPublished'];
  /** In one process the reader is told of the bytes before the commit, so its announcement finds them. */
  readonly onPublishing?: PublisherDeps['onPublishing'];
}

/** Starts the supervised worker; resolves to its stop function (drains in-flight jobs, bounded). */
export async function startWorkerRole(deps: WorkerRoleDeps): Promise<() => Promise<void>> {
  const { config, log, queue, metrics } = deps;
  await ensureInbox(config.inboxDir);
  // A catalog Redis lost is restored from the store before this worker commits (redis-recovery.ts).
  const guard = await startRecoveryGuard({ redis: deps.client, keys: deps.keys, store: deps.store, catalog: deps.catalog, log });
  const rejections = createRejectionLog(deps.client, deps.keys);
  // REJECTED_DIR kept under ingest.rejected_max_bytes, the oldest drops first.
  const rejectedBytes = createRejectedBytes({
    rejectedDir: config.rejectedDir,
    maxBytes: config.ingest.rejectedMaxBytes,
    forget: (ids) => rejections.forget(ids),
    log,
  });
  const superseded = createSupersededLog(deps.client, deps.keys);
  const schema = loadDocumentSchema();
  const onePass = onePassSupport(schema);
  if (!onePass.ok) {
    log.warn(
      { unsupported: onePass.unsupported },
      'the document schema uses a keyword the one-pass check does not know: large drops too are checked with JSON.parse + ajv (several times their size in memory)',
    );
  }
  // Drops are validated and hashed off the event loop (ingest.validate_threads). On the default,
  // a worker whose loop serves no readers checks them on it while its thread waits for a core.
  const threads = config.ingest.validateThreads ?? defaultValidateThreads(deps.servesReaders === true);
  let busyTold = false;
  const check = createDropChecker({
    limits: config.limits,
    schema,
    threads,
    yieldWhenBusy: config.ingest.validateThreads === undefined && deps.servesReaders !== true,
    onCheck: (on) => metrics.dropChecked(on),
    onBusy: () => {
      const msg = `the cores are full (the validation thread waits for one): drops are checked on the event loop for ${CONTENTION_DEFAULTS.loopForMs / 1000} s, then on the thread again`;
      if (busyTold) log.debug(msg);
      else log.info(msg);
      busyTold = true;
    },
  });
  const publish = createPublisher({
    config,
    registry: deps.registry,
    check,
    store: deps.store,
    catalog: deps.catalog,
    log,
    recordRejection: async (r) => {
      await rejectedBytes.added(r.id); // first: it never fails, the Redis write may
      await rejections.record(r);
    },
    recordSuperseded: (r) => superseded.record(r),
    ...(deps.onPublished ? { onPublished: deps.onPublished } : {}),
    ...(deps.onPublishing ? { onPublishing: deps.onPublishing } : {}),
    onCatalogBehind: () => guard.behind(),
    ...(config.ingest.carryMaxBytes > 0 && config.ingest.carryBytesPerSecond > 0
      ? { carry: createCarryPolicy({ maxBytes: config.ingest.carryMaxBytes, bytesPerSecond: config.ingest.carryBytesPerSecond }) }
      : {}),
  });
  const syncIo = config.ingest.syncIoMaxBytes > 0;
  const worker = await superviseWorker({
    queue,
    concurrency: config.ingest.concurrency,
    log,
    create: () => {
      // Each worker (the supervisor may replace one) owns its connection and closes it.
      const connection = createRedis(deps.redisUrl, 'worker', `${config.redis.prefix}:worker`);
      connection.on('error', (err) => log.debug({ err: { message: err.message } }, 'redis worker connection error'));
      deps.onConnection?.(connection);
      const worker = createIngestWorker({
        connection,
        prefix: config.redis.prefix,
        inboxDir: config.inboxDir,
        concurrency: config.ingest.concurrency,
        lockDurationMs: config.ingest.lockDurationMs,
        syncIoMaxBytes: config.ingest.syncIoMaxBytes,
        publish,
        store: deps.store,
        log,
        // A newer drop may have landed while this one was processed from an older claim.
        onSettled: async (result, job) => {
          metrics.jobSettled(result, job);
          const next = join(config.inboxDir, result.filename);
          // existsSync: one stat of microseconds, where a hop to the thread pool costs 0.1–0.3 ms.
          const pending = syncIo
            ? existsSync(next)
            : await access(next).then(
                () => true,
                () => false,
              );
          if (pending) await enqueueDrop(queue, result.filename, Date.now()).catch(() => undefined);
        },
      });
      worker.on('closed', () => void connection.quit().catch(() => connection.disconnect()));
      return worker;
    },
  });
  log.info({ concurrency: config.ingest.concurrency, validateThreads: threads }, 'worker ready');
  // Tell `publish` and `rejected retry` which inbox this worker watches (inbox-marker.ts).
  const registration = await startInboxRegistration({ inboxDir: config.inboxDir, redis: deps.client, keys: deps.keys, log });
  // Old rejected drops leave REJECTED_DIR (ingest.rejected_retention; every worker may do it: rm is idempotent).
  const stopRetention = startRejectedRetention({
    rejectedDir: config.rejectedDir,
    retentionMs: config.ingest.rejectedRetentionMs,
    forget: (ids) => rejections.forget(ids),
    log,
  });
  // Staged uploads no job settles (a reader died between staging and queueing) are removed by age.
  const sweepEveryMs = Math.max(1000, Math.min(60_000, Math.floor(config.publish.stagedMaxAgeMs / 2)));
  const sweep = setInterval(() => {
    sweepStaged({ store: deps.store, queue, maxAgeMs: config.publish.stagedMaxAgeMs, log }).catch((err: unknown) =>
      log.warn({ err: { message: (err as Error).message } }, 'could not sweep the staged uploads; trying again later'),
    );
  }, sweepEveryMs);
  sweep.unref();
  return async () => {
    clearInterval(sweep);
    const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), config.ingest.shutdownTimeoutMs).unref());
    try {
      if ((await Promise.race([worker.close(), timeout])) === 'timeout') {
        log.warn({ timeoutMs: config.ingest.shutdownTimeoutMs }, 'in-flight jobs did not finish in time; their claims are kept and retried on the next start');
        await worker.close(true);
      }
    } finally {
      await stopRetention();
      await check.close();
      await rejectedBytes.settled();
      await registration.close();
      await guard.close();
    }
  };
}
