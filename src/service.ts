/**
 * Composes the roles of `oddsfiles start` (watcher, worker, reader) from their parts, in one
 * process or several. Everything is built here from the frozen config and passed down.
 */
import type { Redis } from 'ioredis';
import type { Config } from './config.js';
import { createCatalog } from './catalog/redis-catalog.js';
import { buildRegistry } from './feeds/registry.js';
import type { IngestQueue } from './ingest/queue.js';
import type { Logger } from './log.js';
import type { RunningReader } from './reader/index.js';
import type { PublishPort } from './ports/publish.js';
import { createRedis, redactUrl, whenReady } from './redis/connect.js';
import { redisKeys } from './redis/key-names.js';
import { createRedisOutageLog } from './redis/outage-log.js';
import { resolveRedis } from './redis/private-server.js';
import { createChangeTally, shareChangeStats } from './ops/change-stats.js';
import { createMetrics } from './ops/metrics.js';
import { announcePresence } from './ops/presence.js';
import { registerOps } from './ops/ops-plugin.js';
import { startMetricsServer } from './ops/metrics-server.js';
import { createQueueCounts } from './ops/queue-counts.js';
import { openStore } from './store/index.js';

export const ROLES = ['watcher', 'worker', 'reader'] as const;
export type Role = (typeof ROLES)[number];

export interface RunningService {
  readonly roles: readonly Role[];
  /** The reader's address, when the reader role runs. */
  readonly readerUrl: string | undefined;
  /** Drain and stop: watcher first, then in-flight jobs (bounded), then the reader and Redis. */
  close(): Promise<void>;
}

/**
 * A stop's deadline is ingest.shutdown_timeout plus STOP_GRACE_MS (the worker role's own forced
 * close and manifest flush run at the timeout: they get the grace); past it, each step of the stop
 * may take LATE_STEP_MS more (see close).
 */
const STOP_GRACE_MS = 3000;
const LATE_STEP_MS = 1000;

export async function startService(config: Config, roles: readonly Role[], log: Logger): Promise<RunningService> {
  const closers: (() => Promise<unknown>)[] = [];
  // Every Redis connection of the process (the worker role's too): see `close`.
  const redisConnections = new Set<Redis>();
  let stopping = false;
  const close = async () => {
    stopping = true;
    // With Redis away, what waits for it (the watcher's adds, BullMQ's closes: they wait for the
    // connection to be ready) would hold the stop until Redis came back. After
    // ingest.shutdown_timeout + STOP_GRACE_MS the connections that are not ready are dropped, and
    // each step of the stop still running or still to run gets LATE_STEP_MS more at most. Nothing is lost: a drop
    // not queued stays in the inbox and a claim in .processing, for the next start.
    let late: (() => void) | undefined;
    const lateSignal = new Promise<void>((resolve) => (late = resolve));
    const deadline = setTimeout(() => {
      const stuck = [...redisConnections].filter((c) => c.status !== 'ready' && c.status !== 'end');
      if (stuck.length > 0) {
        log.warn(
          { connections: stuck.length },
          'stopping: Redis does not answer; dropping its connections (drops not queued stay in the inbox, claims in .processing)',
        );
        for (const c of stuck) c.disconnect();
      }
      late!();
    }, config.ingest.shutdownTimeoutMs + STOP_GRACE_MS);
    deadline.unref();
    const oneMore = () => new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), LATE_STEP_MS).unref());
    try {
      for (const fn of closers.reverse()) {
        const step = fn().catch((err: unknown) => log.warn({ err: { message: (err as Error).message } }, 'error while stopping'));
        // Unbounded until the deadline; from then on (or at once, past it), LATE_STEP_MS for this step.
        const limit = lateSignal.then(oneMore);
        if ((await Promise.race([step, limit])) === 'late') log.warn({ afterMs: LATE_STEP_MS }, 'stopping: a step did not finish in time; going on without it');
      }
    } finally {
      clearTimeout(deadline);
    }
  };
  try {
    const redisInfo = await resolveRedis(config, { startPrivate: true, log: (m) => log.info(m) });
    if (redisInfo.privateServer) closers.push(() => redisInfo.privateServer!.stop());
    const keys = redisKeys(config.redis.prefix);
    const connections: Redis[] = [];
    const connect = (role: 'worker' | 'client' | 'subscriber', name: string) => {
      const c = createRedis(redisInfo.url, role, `${config.redis.prefix}:${name}`);
      c.on('error', (err) => log.debug({ err: { message: err.message }, connection: name }, 'redis connection error'));
      connections.push(c);
      redisConnections.add(c);
      return c;
    };
    closers.push(async () => {
      await Promise.all(connections.map((c) => c.quit().catch(() => c.disconnect())));
    });

    const store = await openStore(config);
    closers.push(() => store.close());
    const client = connect('client', 'client');
    await whenReady(client);
    // Every role says it runs under this prefix (`keys create` warns when nothing does).
    const stopPresence = announcePresence(client, keys, roles);
    closers.push(async () => stopPresence());
    const catalog = createCatalog(client, keys, config.changes, config.history);
    const registry = buildRegistry(config.bookmakers, config.sports);
    // BullMQ is loaded where a role needs it (watcher, worker, a reader taking PUTs) and, in a
    // reader-only process, on the first request of the queue dashboard: a reader never needs it otherwise.
    let opening: Promise<IngestQueue> | undefined;
    const openQueue = (): Promise<IngestQueue> => {
      opening ??= import('./ingest/queue.js').then(({ createIngestQueue }) => {
        // Not once stopping: its connection would outlive the closers that already ran.
        if (stopping) throw new Error('the service is stopping');
        const connection = connect('worker', 'queue');
        const queue = createIngestQueue(connection, config.redis.prefix);
        // BullMQ forwards its connection's errors: one warn per Redis outage, not one per retry.
        const outage = createRedisOutageLog({ log, connection: 'queue', redis: connection, errorMsg: 'queue error' });
        outage.watch(queue);
        closers.push(async () => {
          await queue.close();
          outage.close();
        });
        return queue;
      });
      return opening;
    };
    const queue = roles.includes('watcher') || roles.includes('worker') ? await openQueue() : undefined;

    // One metrics registry per process; shared state (queue depth, health) is read at scrape time.
    const metrics = createMetrics({ defaultLabels: { role: roles.join('+') } });
    // Queue depth with plain ioredis (the same counts as BullMQ's, tested against them).
    metrics.bindQueue(createQueueCounts(client, config.redis.prefix));
    metrics.bindProbe('redis', () => client.ping());
    metrics.bindProbe('store', () => store.ping());
    if (config.metricsPort !== undefined) {
      const server = await startMetricsServer({ metrics, port: config.metricsPort, host: config.http.host, adminToken: config.adminToken, log });
      closers.push(() => server.close());
    }

    let readerUrl: string | undefined;
    let offerToReader: RunningReader['offer'] | undefined;
    if (roles.includes('reader')) {
      // PUT /v1/data goes through the queue like a drop: a reader that takes PUTs loads BullMQ and
      // the document validator (for dry runs); one with publish.http off never does.
      let publisher: PublishPort | undefined;
      if (config.publish.http) {
        const [{ startHttpPublisher }, publishQueue] = await Promise.all([import('./ingest/http/http-publish.js'), openQueue()]);
        const started = await startHttpPublisher({
          config,
          queue: publishQueue,
          eventsConnection: connect('worker', 'publish-events'),
          store,
          catalog,
          registry,
          log,
        });
        publisher = started;
        closers.push(() => started.close());
      }
      // Loaded only where the reader runs: watcher and worker processes never load Fastify.
      const { startReader } = await import('./reader/index.js');
      // With the worker in this process the reader is handed what it publishes: nothing to carry.
      const carried = !roles.includes('worker');
      // The change endpoints' figures, counted in the metrics and shared through Redis for `status`.
      const tally = createChangeTally(metrics.changes);
      const stopStats = shareChangeStats(client, keys, tally.stats);
      closers.push(async () => stopStats());
      const reader = await startReader({
        config,
        redis: client,
        subscriber: connect('subscriber', 'reader-sub'),
        store,
        catalog,
        log,
        registry,
        metrics,
        changeCounters: { ...tally, tooManyStreams: () => metrics.rateLimited('streams') },
        // /metrics, the queue dashboard (opened on its first request) and the HTTP counts.
        register: (app) => registerOps(app, { config, metrics, queue: queue ?? openQueue }),
        enforceLimits: true,
        carried,
        publisher,
      });
      metrics.bindCatalog(() => reader.entries(), { staleAfterMs: config.staleAfterMs });
      readerUrl = reader.url;
      offerToReader = reader.offer;
      closers.push(() => reader.close());
    }

    if (roles.includes('worker') && queue) {
      const { startWorkerRole } = await import('./ingest/worker-role.js');
      const stop = await startWorkerRole({
        config,
        redisUrl: redisInfo.url,
        client,
        keys,
        queue,
        store,
        catalog,
        registry,
        metrics,
        log,
        onPublished: offerToReader,
        onConnection: (c) => redisConnections.add(c),
      });
      closers.push(stop);
    }

    if (roles.includes('watcher') && queue) {
      const [{ startWatcher }, { createRejectionLog }] = await Promise.all([
        import('./ingest/drop-folder/watcher.js'),
        import('./ingest/rejections/rejection-log.js'),
      ]);
      const watcher = await startWatcher({
        inboxDir: config.inboxDir,
        queue,
        settleMs: config.ingest.settleMs,
        lateWrites: {
          rejectedDir: config.rejectedDir,
          watchMs: config.ingest.settleMaxMs,
          forgetRejection: (r) => createRejectionLog(client, keys).remove(r),
        },
        rescanMs: config.ingest.rescanMs,
        pollMs: config.ingest.pollMs,
        syncIo: config.ingest.syncIoMaxBytes > 0,
        log,
      });
      closers.push(() => watcher.close());
    }

    log.info({ roles, redis: redactUrl(redisInfo.url), prefix: config.redis.prefix, store: store.description, reader: readerUrl }, 'oddsfiles started');
    return { roles, readerUrl, close };
  } catch (err) {
    await close();
    throw err;
  }
}
