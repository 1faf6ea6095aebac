/**
 * Composes the roles of `oddsfiles start` (watcher, worker, reader) from their parts, in one
 * process or several. Everything is built here from the frozen config and passed down.
 */
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import type { Config } from './config.js';
import { createCatalog } from './catalog/redis-catalog.js';
import { buildRegistry } from './feeds/registry.js';
import { createDocumentValidator, loadDocumentSchema, onePassSupport } from './feeds/validate.js';
import { ensureInbox } from './ingest/inbox.js';
import { createPublisher } from './ingest/publish.js';
import { createIngestQueue, enqueueDrop } from './ingest/queue.js';
import { createRejectionLog } from './ingest/rejection-log.js';
import { superviseWorker } from './ingest/supervisor.js';
import { startWatcher } from './ingest/watcher.js';
import { createIngestWorker } from './ingest/worker.js';
import type { Logger } from './log.js';
import type { RunningReader } from './reader/index.js';
import { createRedis, whenReady } from './redis/connect.js';
import { redisKeys } from './redis/keys.js';
import { resolveRedis } from './redis/private-server.js';
import { createMetrics } from './ops/metrics.js';
import { startMetricsServer } from './ops/metrics-server.js';
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

export async function startService(config: Config, roles: readonly Role[], log: Logger): Promise<RunningService> {
  const closers: (() => Promise<unknown>)[] = [];
  const close = async () => {
    for (const fn of closers.reverse()) {
      await fn().catch((err: unknown) => log.warn({ err: { message: (err as Error).message } }, 'error while stopping'));
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
      return c;
    };
    closers.push(async () => {
      await Promise.all(connections.map((c) => c.quit().catch(() => c.disconnect())));
    });

    const store = await openStore(config);
    closers.push(() => store.close());
    const client = connect('client', 'client');
    await whenReady(client);
    const catalog = createCatalog(client, keys);
    const registry = buildRegistry(config.bookmakers, config.sports);
    const queueConnection = connect('worker', 'queue');
    const queue = createIngestQueue(queueConnection, config.redis.prefix);
    closers.push(() => queue.close());

    // One metrics registry per process; shared state (queue depth, health) is read at scrape time.
    const metrics = createMetrics({ defaultLabels: { role: roles.join('+') } });
    metrics.bindQueue(queue);
    metrics.bindProbe('redis', () => client.ping());
    metrics.bindProbe('store', () => store.ping());
    if (config.metricsPort !== undefined) {
      const server = await startMetricsServer({ metrics, port: config.metricsPort, host: config.http.host, adminToken: config.adminToken, log });
      closers.push(() => server.close());
    }

    let readerUrl: string | undefined;
    let offerToReader: RunningReader['offer'] | undefined;
    if (roles.includes('reader')) {
      // Loaded only where the reader runs: watcher and worker processes never load Fastify.
      const { startReader } = await import('./reader/index.js');
      const reader = await startReader({ config, redis: client, subscriber: connect('subscriber', 'reader-sub'), store, catalog, log, registry, metrics, queue, enforceLimits: true });
      readerUrl = reader.url;
      offerToReader = reader.offer;
      closers.push(() => reader.close());
    }

    if (roles.includes('worker')) {
      await ensureInbox(config.inboxDir);
      const rejections = createRejectionLog(client, keys);
      const schema = loadDocumentSchema();
      const onePass = onePassSupport(schema);
      if (!onePass.ok) {
        log.warn({ unsupported: onePass.unsupported }, 'the document schema uses a keyword the one-pass check does not know: every drop is checked with JSON.parse + ajv (slower, several times its size in memory)');
      }
      const publish = createPublisher({
        config,
        registry,
        validate: createDocumentValidator(config.limits, schema),
        store,
        catalog,
        log,
        recordRejection: (r) => rejections.record(r),
        // In one process the reader takes the bytes just published: no store read, no wait for the announcement.
        ...(offerToReader ? { onPublished: offerToReader } : {}),
      });
      const worker = await superviseWorker({
        queue,
        concurrency: config.ingest.concurrency,
        log,
        create: () => {
          // Each worker (the supervisor may replace one) owns its connection and closes it.
          const connection = createRedis(redisInfo.url, 'worker', `${config.redis.prefix}:worker`);
          connection.on('error', (err) => log.debug({ err: { message: err.message } }, 'redis worker connection error'));
          const worker = createIngestWorker({
            connection,
            prefix: config.redis.prefix,
            inboxDir: config.inboxDir,
            concurrency: config.ingest.concurrency,
            lockDurationMs: config.ingest.lockDurationMs,
            publish,
            log,
            // A newer drop may have landed while this one was processed from an older claim.
            onSettled: async (result, job) => {
              metrics.jobSettled(result, job);
              const pending = await access(join(config.inboxDir, result.filename)).then(() => true, () => false);
              if (pending) await enqueueDrop(queue, result.filename, Date.now()).catch(() => undefined);
            },
          });
          worker.on('closed', () => void connection.quit().catch(() => connection.disconnect()));
          return worker;
        },
      });
      closers.push(async () => {
        const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), config.ingest.shutdownTimeoutMs).unref());
        if ((await Promise.race([worker.close(), timeout])) === 'timeout') {
          log.warn({ timeoutMs: config.ingest.shutdownTimeoutMs }, 'in-flight jobs did not finish in time; their claims are kept and retried on the next start');
          await worker.close(true);
        }
      });
    }

    if (roles.includes('watcher')) {
      const watcher = await startWatcher({
        inboxDir: config.inboxDir,
        queue,
        settleMs: config.ingest.settleMs,
        rescanMs: config.ingest.rescanMs,
        pollMs: config.ingest.pollMs,
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

function redactUrl(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, '//***@');
}
