/**
 * The reader role: load what is published and the keys, then listen. `oddsfiles start` calls
 * startReader; tests build the parts with createReaderState and buildReaderApp.
 */
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { CatalogEntry } from '../catalog/types.js';
import { buildReaderApp, type ChangeCounters, type PressureLimits } from './app.js';
import type { RateLimitCheck } from './limits/rate-limit.js';
import { whenReady } from '../redis/connect.js';
import { createReaderState, type ReaderStateDeps } from './state.js';
import { createChangeLog } from '../catalog/change-log.js';
import { redisKeys } from '../redis/key-names.js';
import { createChangeFeed } from './changes/feed.js';
import { createStreamSlots, type StreamSlots } from './changes/stream-slots.js';
import type { LimitMetrics } from './limits/limit-fail-open.js';
import type { PublishedCache } from './data/cache.js';
import type { PublishPort } from '../ports/publish.js';
import { preparePublisher } from './publishing/prepare.js';

export { buildReaderApp, EDGE_DEFAULTS, type EdgeLimits, type PressureLimits, type ReaderAppDeps } from './app.js';
export { createReaderState, type ReaderState, type ReaderStateDeps } from './state.js';
export type { RateDecision, RateLimitCheck } from './limits/rate-limit.js';

/** What the reader's state needs (state.ts), and what only the serving reader does. */
export interface ReaderDeps extends ReaderStateDeps {
  /** A rate-limit check of one's own; see `enforceLimits` for the real one. */
  readonly rateLimit?: RateLimitCheck;
  /**
   * Enforce the plans' rates and the failed-authentication lockout, counted in Redis on a
   * connection of their own that fails fast (fail-open while Redis is away). `oddsfiles start`
   * sets it; off by default for embedders such as the benchmark.
   */
  readonly enforceLimits?: boolean;
  /** Extra hooks and routes on the reader's app, added before its own (see ReaderAppDeps). */
  readonly register?: (app: FastifyInstance) => Promise<void> | void;
  /** Told of answers, refusals, failed authentications and uploads (the process's metrics fit it). */
  readonly metrics?: ReaderMetrics;
  /** Counters of the change endpoints: open streams, events written, slow clients dropped, long-polls. */
  readonly changeCounters?: ChangeCounters;
  /** Take PUT /v1/data/{filename} through this port (src/ports/publish.ts); without it, reads only. */
  readonly publisher?: PublishPort | undefined;
  /** When the process counts as overloaded (defaults in edge-limits.ts). */
  readonly pressure?: PressureLimits | undefined;
  /** Share the port with the other reader processes of the machine (SO_REUSEPORT; Linux). */
  readonly reusePort?: boolean | undefined;
}

/** What the reader reports as it serves. It defines the shape; the composition root passes the metrics. */
export interface ReaderMetrics extends LimitMetrics {
  httpResponse(route: string, method: string, status: number, durationMs?: number): void;
  authFailed(reason: string): void;
  httpPublished(outcome: string): void;
}

export interface RunningReader {
  /** Where it listens, e.g. http://127.0.0.1:8080 (the real port when PORT=0). */
  readonly url: string;
  /** Resolves once the published files and the keys are loaded (until then /v1 answers 503). */
  readonly ready: Promise<void>;
  /** Hold a version this process has just published, bytes and all (no store read): see PublishedCache.offer. */
  readonly offer: PublishedCache['offer'];
  /** The bytes of a version this process is about to commit: see PublishedCache.expect. */
  readonly expect: PublishedCache['expect'];
  /** The catalog entries this reader holds now (for the freshness metrics). */
  entries(): Iterable<CatalogEntry>;
  /** Stop listening (in-flight requests finish), stop refreshing, unsubscribe. */
  close(): Promise<void>;
}

/** How long a rate-limit command may take before the request is served without it. */
const LIMITS_COMMAND_TIMEOUT_MS = 300;

export async function startReader(deps: ReaderDeps): Promise<RunningReader> {
  const state = await createReaderState(deps);
  let limitsRedis: Redis | undefined;
  let slots: StreamSlots | undefined;
  // The change log is read with XREAD BLOCK: a connection of its own that nothing else waits on.
  // A read cut by a lost connection fails instead of being sent again to whatever server answers
  // next (a promoted replica may lack the last positions: the tail checks first).
  const tailRedis = deps.redis.duplicate({ connectionName: `${deps.config.redis.prefix}:reader-changes`, autoResendUnfulfilledCommands: false });
  tailRedis.on('error', (err) => deps.log.debug({ err: { message: err.message } }, 'redis change log connection error'));
  const feed = await createChangeFeed({
    tail: createChangeLog(tailRedis, redisKeys(deps.config.redis.prefix)),
    log: createChangeLog(deps.redis, redisKeys(deps.config.redis.prefix)),
    published: state.published,
    logger: deps.log.child({ component: 'changes' }),
  });
  const stopFeed = async () => {
    const closing = feed.close();
    tailRedis.disconnect();
    await closing;
  };
  try {
    const { metrics } = deps;
    if (deps.enforceLimits && !deps.rateLimit) {
      limitsRedis = deps.redis.duplicate({
        connectionName: `${deps.config.redis.prefix}:reader-limits`,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        commandTimeout: LIMITS_COMMAND_TIMEOUT_MS,
      });
      limitsRedis.on('error', (err) => deps.log.debug({ err: { message: err.message } }, 'redis limits connection error'));
      // Briefly: while Redis is away the reader starts anyway and serves without limits (fail-open).
      await whenReady(limitsRedis, 2000).catch(() => undefined);
    }
    // Streams per key counted across readers, where the plan limits are enforced.
    slots = limitsRedis
      ? createStreamSlots({
          redis: limitsRedis,
          keys: redisKeys(deps.config.redis.prefix),
          leaseMs: deps.config.changes.streamLeaseMs,
          timeoutMs: LIMITS_COMMAND_TIMEOUT_MS,
          onError: (err) => deps.log.debug({ err: { message: err.message } }, 'stream slots: Redis did not answer'),
        })
      : undefined;
    const app = await buildReaderApp({
      ...deps,
      state,
      feed,
      changeCounters: deps.changeCounters,
      streamSlots: slots,
      limits: limitsRedis ? { redis: limitsRedis, subscriber: deps.subscriber, metrics: deps.metrics } : undefined,
      onAuthFailed: metrics ? (reason) => metrics.authFailed(reason) : undefined,
      onFrontDoorResponse: metrics ? (route, method, status, ms) => metrics.httpResponse(route, method, status, ms) : undefined,
      onEdgeResponse: metrics ? (route, method, status, ms) => metrics.httpResponse(route, method, status, ms) : undefined,
      publish: deps.publisher
        ? { port: deps.publisher, registry: deps.registry, onOutcome: metrics ? (outcome) => metrics.httpPublished(outcome) : undefined }
        : undefined,
      register: deps.register,
    });
    await preparePublisher(deps.publisher, state.keys, deps.log);
    const address = await app.listen({ host: deps.config.http.host, port: deps.config.http.port, ...(deps.reusePort ? { reusePort: true } : {}) });
    const url = displayUrl(address);
    deps.log.info({ url }, 'reader listening');
    return {
      url,
      ready: state.ready,
      offer: state.published.offer,
      expect: state.published.expect,
      *entries() {
        for (const f of state.published.filenames()) {
          const v = state.published.get(f);
          if (v) yield v.entry;
        }
      },
      async close() {
        await app.close();
        slots?.close();
        await stopFeed();
        await state.close();
        limitsRedis?.disconnect();
      },
    };
  } catch (err) {
    slots?.close();
    limitsRedis?.disconnect();
    await stopFeed();
    await state.close();
    throw err;
  }
}

/** Fastify gives e.g. http://[::1]:8080 or http://127.0.0.1:8080; keep it as is. */
function displayUrl(address: string): string {
  return address.replace(/\/$/, '');
}
