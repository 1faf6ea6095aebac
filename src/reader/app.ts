/**
 * The reader's HTTP application: GET /v1/files and GET /v1/data/{filename} for API consumers,
 * /healthz and /readyz for operators. Order of checks on /v1: key (401), rate (429), published
 * (404), allow-list (403). Every error is a problem+json from src/errors.ts.
 */
import { readFileSync } from 'node:fs';
import { fastify, type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import { REDACT_PATHS, type Logger } from '../log.js';
import type { Store } from '../store/store.js';
import { createFileLists } from './allow.js';
import { authHook, type AuthFailure } from './auth.js';
import { dataHandler } from './data-route.js';
import { filesHandler } from './files-route.js';
import { healthzHandler, readyzHandler } from './health.js';
import { clientErrorHandler, errorHandler, notFoundHandler } from './problem.js';
import { rateLimitHook, type RateLimitCheck } from './rate-limit.js';
import { ReaderLogController } from './request-log.js';
import type { ReaderState } from './state.js';

export interface ReaderAppDeps {
  readonly config: Config;
  /** Command connection, for readiness. */
  readonly redis: Redis;
  readonly store: Store;
  readonly log: Logger;
  /** What the reader holds (see createReaderState). */
  readonly state: ReaderState;
  /** The rate limiter; until one exists every request passes. */
  readonly rateLimit?: RateLimitCheck;
  /**
   * Called on the root instance before the reader's routes and before ready(): where other parts
   * add their hooks and routes (e.g. registerOps: /metrics, /admin/queues). Their errors are
   * problem+json too.
   */
  readonly register?: (app: FastifyInstance) => Promise<void> | void;
  /** Told of every failed authentication (metrics). */
  readonly onAuthFailed?: ((reason: AuthFailure) => void) | undefined;
}

export async function buildReaderApp(deps: ReaderAppDeps): Promise<FastifyInstance> {
  const { config, state } = deps;
  // Redaction at this level too, whatever logger was passed in.
  const log = deps.log.child({ component: 'reader' }, { redact: { paths: REDACT_PATHS, censor: '[redacted]' } });
  const tls = config.http.tls;
  const app = fastify({
    loggerInstance: log,
    logController: new ReaderLogController(),
    // No child logger per request (a measurable cost at this request rate): the one request
    // line and error lines carry reqId themselves.
    childLoggerFactory: (logger) => logger,
    // A number (hops) works at run time (proxy-addr); Fastify's types only name the other forms.
    trustProxy: config.reader.trustProxy as boolean | string,
    clientErrorHandler,
    frameworkErrors: errorHandler,
    // While draining, requests still get real answers: the data is in memory.
    return503OnClosing: false,
    bodyLimit: 16 * 1024,
    routerOptions: { maxParamLength: 200 },
    requestTimeout: 30_000,
    ...(tls ? { https: { cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) } } : {}),
  }) as unknown as FastifyInstance;

  app.decorateRequest('principal', null);
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);
  if (deps.register) await deps.register(app);

  const authenticate = authHook(state.keys, state.loaded, deps.onAuthFailed);
  const rateLimit = rateLimitHook(deps.rateLimit);
  const lists = createFileLists(state.published);

  app.get('/v1/files', { onRequest: authenticate, preHandler: rateLimit }, filesHandler(lists));
  // A wildcard, so that every name (even one with `/` or `..`) goes through the checks in order.
  app.get<{ Params: { '*': string } }>('/v1/data/*', { onRequest: authenticate, preHandler: rateLimit }, dataHandler(state.published));
  app.get('/healthz', healthzHandler());
  app.get('/readyz', readyzHandler({ redis: deps.redis, store: deps.store, loaded: state.loaded }));

  await app.ready();
  return app;
}
