/**
 * Composes the roles of `oddsfiles start` (watcher, worker, reader) from their parts, in one
 * process or several. Everything is built here from the frozen config and passed down.
 */
import type { Redis } from 'ioredis';
import type { Config } from './config.js';
import { createCatalog, type Catalog } from './catalog/redis-catalog.js';
import { buildRegistry, type FeedRegistry } from './feeds/registry.js';
import type { IngestQueue } from './ingest/queue.js';
import type { Logger } from './log.js';
import { RedisUnavailableError } from './errors.js';
import type { Metrics } from './ops/metrics.js';
import type { Store } from './store/store.js';
import type { RunningReader } from './reader/index.js';
import type { PublishPort } from './ports/publish.js';
import { lazyPublisher } from './ports/lazy-publisher.js';
import { createRedis, redactUrl, whenReady } from './redis/connect.js';
import { redisKeys, type RedisKeys } from './redis/key-names.js';
import { createRedisOutageLog } from './redis/outage-log.js';
import { resolveRedis } from './redis/private-server.js';
import { createChangeTally, shareChangeStats } from './ops/change-stats.js';
import { createMetrics } from './ops/metrics.js';
import { announcePresence } from './ops/presence.js';
import { registerOps } from './ops/ops-plugin.js';
import { startMetricsServer } from './ops/metrics-server.js';
import { createQueueCounts } from './ops/queue-counts.js';
import { openStore } from './store/index.js';
import { createStopSequence, type StopSequence } from './stop-sequence.js';

export const ROLES = ['watcher', 'worker', 'reader'] as const;
export type Role = (typeof ROLES)[number];

export interface RunningService {
  readonly roles: readonly Role[];
  /** The reader's address, when the reader role runs. */
  readonly readerUrl: string | undefined;
  /** Drain and stop: watcher first, then in-flight jobs (bounded), then the reader and Redis. */
  close(): Promise<void>;
}

/** What every role of the process shares: built once by `startService`, passed to each role. */
interface Core {
  readonly config: Config;
  readonly log: Logger;
  readonly stops: StopSequence;
  readonly redisUrl: string;
  readonly keys: RedisKeys;
  /** The command connection. */
  readonly client: Redis;
  /** A new Redis connection, closed at stop. */
  connect(role: 'worker' | 'client' | 'subscriber', name: string): Redis;
  readonly store: Store;
  readonly catalog: Catalog;
  readonly registry: FeedRegistry;
  readonly metrics: Metrics;
  /** The ingest queue, opened on first call. */
  openQueue(): Promise<IngestQueue>;
  /** Opened at start for the watcher and the worker roles. */
  readonly queue: IngestQueue | undefined;
}

export interface ServiceOptions {
  /** The reader shares its port with the other reader processes of the machine (SO_REUSEPORT). */
  readonly reusePort?: boolean;
}

export async function startService(config: Config, roles: readonly Role[], log: Logger, options: ServiceOptions = {}): Promise<RunningService> {
  const stops = createStopSequence(log, config.ingest.shutdownTimeoutMs);
  const close = () => stops.stop();
  try {
    const core = await startCore(config, roles, log, stops);
    const { queue } = core;
    const reader = roles.includes('reader') ? await startReaderRole(core, roles, options) : undefined;
    if (roles.includes('worker') && queue) await startWorkerRole(core, queue, reader);
    if (roles.includes('watcher') && queue) await startWatcherRole(core, queue);
    const readerUrl = reader?.url;
    log.info({ roles, redis: redactUrl(core.redisUrl), prefix: config.redis.prefix, store: core.store.description, reader: readerUrl }, 'oddsfiles started');
    return { roles, readerUrl, close };
  } catch (err) {
    await stops.stop({ redisGone: err instanceof RedisUnavailableError });
    throw err;
  }
}

/** Redis (a private server if so configured), the store, the catalog, the queue and the metrics. */
async function startCore(config: Config, roles: readonly Role[], log: Logger, stops: StopSequence): Promise<Core> {
  const redisInfo = await resolveRedis(config, { startPrivate: true, log: (m) => log.info(m) });
  if (redisInfo.privateServer) stops.add(() => redisInfo.privateServer!.stop());
  const connections: Redis[] = [];
  const connect = (role: 'worker' | 'client' | 'subscriber', name: string) => {
    const c = createRedis(redisInfo.url, role, `${config.redis.prefix}:${name}`);
    c.on('error', (err) => log.debug({ err: { message: err.message }, connection: name }, 'redis connection error'));
    connections.push(c);
    stops.watch(c);
    return c;
  };
  stops.add(async () => {
    await Promise.all(connections.map((c) => c.quit().catch(() => c.disconnect())));
  });

  const store = await openStore(config);
  stops.add(() => store.close());
  const client = connect('client', 'client');
  await whenReady(client);
  const keys = redisKeys(config.redis.prefix);
  // Every role says it runs under this prefix (`keys create` warns when nothing does).
  const stopPresence = announcePresence(client, keys, roles);
  stops.add(async () => stopPresence());
  // A worker's commits wait for a restored catalog, and for the replicas (redis.wait_replicas) on a
  // connection of their own: WAIT holds its connection, and requests must not queue behind it.
  const waits = config.redis.waitReplicas > 0 && roles.includes('worker');
  const catalog = createCatalog(waits ? connect('client', 'catalog') : client, keys, config.changes, config.history, {
    requireEpoch: true,
    waitReplicas: config.redis.waitReplicas,
    waitTimeoutMs: config.redis.waitTimeoutMs,
  });
  const registry = buildRegistry(config.bookmakers, config.sports);
  const openQueue = queueOpener(config, log, stops, connect);
  const queue = roles.includes('watcher') || roles.includes('worker') ? await openQueue() : undefined;
  const metrics = await startMetrics(config, roles, log, stops, client, store);
  return { config, log, stops, redisUrl: redisInfo.url, keys, client, connect, store, catalog, registry, metrics, openQueue, queue };
}

/**
 * BullMQ is loaded where a role needs it (watcher, worker, a reader taking PUTs) and, in a
 * reader-only process, on the first request of the queue dashboard: a reader never needs it otherwise.
 */
function queueOpener(config: Config, log: Logger, stops: StopSequence, connect: Core['connect']): () => Promise<IngestQueue> {
  let opening: Promise<IngestQueue> | undefined;
  let close: (() => Promise<void>) | undefined;
  // The queue's place in the stop is taken now, whenever it opens: after the reader and the
  // publisher that use it have stopped.
  stops.add(async () => close?.());
  return () => {
    opening ??= import('./ingest/queue.js').then(({ createIngestQueue }) => {
      // Not once stopping: its connection would outlive the steps of the stop that already ran.
      if (stops.stopping) throw new Error('the service is stopping');
      const connection = connect('worker', 'queue');
      const queue = createIngestQueue(connection, config.redis.prefix);
      // BullMQ forwards its connection's errors: one warn per Redis outage, not one per retry.
      const outage = createRedisOutageLog({ log, connection: 'queue', redis: connection, errorMsg: 'queue error' });
      outage.watch(queue);
      close = async () => {
        await queue.close();
        outage.close();
      };
      return queue;
    });
    return opening;
  };
}

/** One metrics registry per process; shared state (queue depth, health) is read at scrape time. */
async function startMetrics(config: Config, roles: readonly Role[], log: Logger, stops: StopSequence, client: Redis, store: Store): Promise<Metrics> {
  const metrics = createMetrics({ defaultLabels: { role: roles.join('+') } });
  // Queue depth with plain ioredis (the same counts as BullMQ's, tested against them).
  metrics.bindQueue(createQueueCounts(client, config.redis.prefix));
  metrics.bindProbe('redis', () => client.ping());
  metrics.bindProbe('store', () => store.ping());
  if (config.metricsPort !== undefined) {
    const server = await startMetricsServer({ metrics, port: config.metricsPort, host: config.http.host, adminToken: config.adminToken, log });
    stops.add(() => server.close());
  }
  return metrics;
}

async function startReaderRole(core: Core, roles: readonly Role[], options: ServiceOptions): Promise<RunningReader> {
  const { config, log, stops, client, keys, store, catalog, registry, metrics, connect, openQueue, queue } = core;
  // PUT /v1/data goes through the queue like a drop: a reader loads BullMQ and the document
  // validator once a key may publish (src/reader/publishing/prepare.ts) or on its first PUT; one
  // no key publishes to, or with publish.http off, never does.
  let publisher: PublishPort | undefined;
  if (config.publish.http) {
    const lazy = lazyPublisher(async () => {
      const [{ startHttpPublisher }, publishQueue] = await Promise.all([import('./ingest/http/http-publish.js'), openQueue()]);
      return startHttpPublisher({ config, queue: publishQueue, eventsConnection: connect('worker', 'publish-events'), store, catalog, registry, log });
    });
    publisher = lazy;
    stops.add(() => lazy.close());
  }
  // Loaded only where the reader runs: watcher and worker processes never load Fastify.
  const { startReader } = await import('./reader/index.js');
  // With the worker in this process the reader is handed what it publishes: nothing to carry.
  const carried = !roles.includes('worker');
  // The change endpoints' figures, counted in the metrics and shared through Redis for `status`.
  const tally = createChangeTally(metrics.changes);
  const stopStats = shareChangeStats(client, keys, tally.stats);
  stops.add(async () => stopStats());
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
    reusePort: options.reusePort,
  });
  metrics.bindCatalog(() => reader.entries(), { staleAfterMs: config.staleAfterMs });
  stops.add(() => reader.close());
  return reader;
}

async function startWorkerRole(core: Core, queue: IngestQueue, reader: Pick<RunningReader, 'offer' | 'expect'> | undefined): Promise<void> {
  const { config, log, stops, client, keys, store, catalog, registry, metrics } = core;
  const { startWorkerRole: start } = await import('./ingest/worker-role.js');
  const stop = await start({
    config,
    redisUrl: core.redisUrl,
    client,
    keys,
    queue,
    store,
    catalog,
    registry,
    metrics,
    log,
    servesReaders: reader !== undefined,
    onPublished: reader?.offer,
    onPublishing: reader?.expect,
    onConnection: (c) => stops.watch(c),
  });
  stops.add(stop);
}

async function startWatcherRole(core: Core, queue: IngestQueue): Promise<void> {
  const { config, log, stops, client, keys } = core;
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
  stops.add(() => watcher.close());
}
