/**
 * The reader's HTTP application: GET /v1/files and GET /v1/data/{filename} for API consumers,
 * GET /v1/openapi.json (the API's OpenAPI 3.1 description), /healthz and /readyz for operators.
 * Order of checks on /v1: credentials (401; marketplace plan not mapped: 403), rate (429),
 * published (404), allow-list (403); another method than GET or HEAD is refused (405 + Allow)
 * before any body is read. Every error is a problem+json from src/errors.ts, and every answer gets
 * its request line and its count, also those given before routing (edge-report.ts).
 *
 * The edge: HTTPS (HTTP/2 with ALPN, HTTP/1.1 too) when config.http.tls names a certificate and
 * key, plain HTTP otherwise; bounded headers (431), request and keep-alive timeouts, 503 +
 * Retry-After when the process is overloaded (event-loop delay, heap; /healthz and /metrics are
 * exempt), and no stack trace or internal path in any answer.
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { fastify, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import { createMarketplaceAuth } from '../keys/marketplace.js';
import type { Principal } from '../keys/ring.js';
import { REDACT_PATHS, REQUEST_LINE_MSG, type Logger } from '../log.js';
import type { Store } from '../store/store.js';
import { createFileLists } from './data/allow.js';
import { createVariantPicker, DATA_ROUTE, MAX_NAME_LENGTH } from './data/data-route.js';
import { createReaderDeltas } from './deltas/delta.js';
import { clientIp, trustFunction } from './client-ip.js';
import { createFrontDoor, routeThroughFrontDoor } from './data/front-door.js';
export { frontDoorAnswered } from './data/front-door.js';
import { FILES_PATH } from './data/files-route.js';
import { healthzHandler, readyzHandler } from './health.js';
import { registerReaderLimits, type ReaderLimitsDeps } from './limits/limits.js';
import { DATA_ROUTE_SCHEMA, FILES_ROUTE_SCHEMA, OPENAPI_PATH, OPENAPI_ROUTE_SCHEMA, openApiHandler, registerOpenApi } from './openapi.js';
import { createEdgeReport, type ResponseObserver } from './limits/edge-report.js';
import { EDGE_DEFAULTS, registerPressure, type EdgeLimits, type PressureLimits } from './limits/edge-limits.js';
import {
  attachEdgeHandlers,
  clientErrorHandler,
  errorHandler,
  frameworkErrorHandler,
  notFoundHandler,
  refuseOtherMethods,
  refuseOtherMethodsWithPut,
  requireHost,
  sendFlat,
} from './problem.js';
import type { RateLimitCheck } from './limits/rate-limit.js';
import { createRequestIds, minLoggedStatus, ReaderLogController, requestLine } from './request-log.js';
import type { ReaderState } from './state.js';
import type { ChangeFeed } from './changes/feed.js';
import { registerChangeRoutes, STREAM_PATH } from './changes/routes.js';
import { registerHistory } from './history/index.js';
import { createStreamHub, type StreamCounters } from './changes/streams.js';
import type { StreamSlots } from './changes/stream-slots.js';
import { createV1Handler, type AuthFailure, type V1Handler, type V1Reply } from './data/v1-handler.js';
import { registerPublishRoute, type PublishRouteDeps } from './publishing/publish-route.js';

/** Counters of the change endpoints: streams open, events sent, slow clients dropped, long-polls waiting. */
export interface ChangeCounters extends StreamCounters {
  waiting?(delta: number): void;
  /** A stream refused for the key's limit of open streams. */
  tooManyStreams?(): void;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Who a /v1 request acted for, once the v1 handler has answered it (the request line's keyId). */
    principal: Principal | null;
  }
}

export interface ReaderAppDeps {
  readonly config: Config;
  /** Command connection, for readiness. */
  readonly redis: Redis;
  readonly store: Store;
  readonly log: Logger;
  /** What the reader holds (see createReaderState). */
  readonly state: ReaderState;
  /** A rate-limit check of one's own (tests); `limits` builds the real one. */
  readonly rateLimit?: RateLimitCheck | undefined;
  /**
   * Plan rate limits and the failed-authentication lockout, counted in Redis (limits.ts). Without
   * it (and without `rateLimit`) every request passes.
   */
  readonly limits?: Omit<ReaderLimitsDeps, 'prefix' | 'authFailures' | 'log'> | undefined;
  /**
   * Called on the root instance before the reader's routes and before ready(): where other parts
   * add their hooks and routes (e.g. registerOps: /metrics, /admin/queues). Their errors are
   * problem+json too.
   */
  readonly register?: (app: FastifyInstance) => Promise<void> | void;
  /** Told of every failed authentication (metrics). */
  readonly onAuthFailed?: ((reason: AuthFailure) => void) | undefined;
  /**
   * Told of every response the front door sends (route pattern, method, status, ms), as
   * registerOps's onResponse hook is told of Fastify's: pass the same counter (Metrics.httpResponse).
   */
  readonly onFrontDoorResponse?: ((route: string, method: string, status: number, durationMs: number) => void) | undefined;
  /**
   * Told of every response given before Fastify routes the request (a URL that cannot be decoded,
   * a request Node's parser refuses, CONNECT, Upgrade: edge-report.ts), under the route label
   * `unmatched`; the duration is undefined when the start of the request was never seen. Pass the
   * same counter (Metrics.httpResponse).
   */
  readonly onEdgeResponse?: ResponseObserver | undefined;
  readonly pressure?: PressureLimits | undefined;
  readonly edge?: EdgeLimits | undefined;
  /** The change feed (changes/feed.ts): with it, /v1/catalog, /v1/changes and /v1/stream are served. */
  readonly feed?: ChangeFeed | undefined;
  /** Counters of the change endpoints (metrics). */
  readonly changeCounters?: ChangeCounters | undefined;
  /** The keys' open streams counted across readers (stream-slots.ts); without it, on this reader only. */
  readonly streamSlots?: StreamSlots | undefined;
  /** With it, PUT /v1/data/{filename} publishes (publish-route.ts). */
  readonly publish?: Pick<PublishRouteDeps, 'port' | 'registry' | 'onOutcome'> | undefined;
}

export { EDGE_DEFAULTS, type EdgeLimits, type PressureLimits } from './limits/edge-limits.js';

export async function buildReaderApp(deps: ReaderAppDeps): Promise<FastifyInstance> {
  const { config, state } = deps;
  // Redaction at this level too, whatever logger was passed in.
  const log = deps.log.child({ component: 'reader' }, { redact: { paths: REDACT_PATHS, censor: '[redacted]' } });
  const edge = { ...EDGE_DEFAULTS, ...deps.edge };
  // A PUT body may take publish.upload_timeout: the listener's whole-request limit must not cut it first.
  if (deps.publish) edge.requestTimeoutMs = Math.max(edge.requestTimeoutMs, config.publish.uploadTimeoutMs + 1000);
  const tls = config.http.tls;
  // Shared with the front door, so that both senders name requests and clients alike.
  const nextRequestId = createRequestIds();
  const trust = trustFunction(config.reader.trustProxy);
  const ipOf = clientIp(trust);
  // The answers Fastify's hooks never see get their request line and count here.
  const edgeReport = createEdgeReport({ log, minLoggedStatus: minLoggedStatus(config.reader.requestLog), nextRequestId, observe: deps.onEdgeResponse });
  const app = fastify({
    loggerInstance: log,
    logController: new ReaderLogController(config.reader.requestLog),
    // No child logger per request (a measurable cost at this request rate): the one request
    // line and error lines carry reqId themselves.
    childLoggerFactory: (logger: FastifyBaseLogger) => logger,
    genReqId: nextRequestId,
    trustProxy: trust ?? false,
    clientErrorHandler: clientErrorHandler(edgeReport),
    frameworkErrors: frameworkErrorHandler(edgeReport, ipOf),
    // While draining, requests still get real answers: the data is in memory.
    return503OnClosing: false,
    bodyLimit: 16 * 1024,
    routerOptions: { maxParamLength: MAX_NAME_LENGTH },
    connectionTimeout: edge.connectionTimeoutMs,
    keepAliveTimeout: edge.keepAliveTimeoutMs,
    requestTimeout: edge.requestTimeoutMs,
    maxRequestsPerSocket: edge.maxRequestsPerSocket,
    // TLS only when configured: HTTP/2 negotiated by ALPN, HTTP/1.1 for the others. Plain HTTP
    // is never answered on that port (a plaintext request fails the TLS handshake).
    ...(tls
      ? {
          http2: true,
          http2SessionTimeout: EDGE_DEFAULTS.http2SessionTimeoutMs,
          https: {
            allowHTTP1: true,
            cert: readFileSync(tls.certFile),
            key: readFileSync(tls.keyFile),
            minVersion: 'TLSv1.2',
            maxHeaderSize: edge.maxHeaderBytes,
            settings: { maxHeaderListSize: edge.maxHeaderBytes },
          },
        }
      : {}),
  } as Parameters<typeof fastify>[0]) as unknown as FastifyInstance;
  attachEdgeHandlers(app.server, edge, edgeReport, ipOf);

  app.decorateRequest('principal', null);
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);
  app.addHook('onRequest', requireHost);
  await registerOpenApi(app);
  await registerPressure(app, deps.pressure, log);
  // From the start of close() on, Fastify answers with `Connection: close` so that keep-alive
  // clients move to another reader: the front door then leaves every request to it. (Added before
  // the hooks of `register`, so that it holds while theirs run.)
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  if (deps.register) await deps.register(app);

  const limits = deps.limits
    ? await registerReaderLimits(app, { ...deps.limits, prefix: config.redis.prefix, authFailures: config.reader.authFailures, log })
    : undefined;
  const lists = createFileLists(state.published);
  const pick = createVariantPicker(state.published);
  const deltas = createReaderDeltas({
    store: deps.store,
    redis: deps.redis,
    prefix: config.redis.prefix,
    published: state.published,
    log,
    limits: config.deltas,
  });
  app.addHook('onClose', () => deltas.close());
  const v1 = createV1Handler({
    ring: state.keys,
    isLoaded: state.loaded,
    marketplaces: createMarketplaceAuth(config.marketplaces, config.plans),
    gate: limits?.authFailures,
    onAuthFailed: deps.onAuthFailed,
    rate: deps.rateLimit ?? limits?.check,
    published: state.published,
    lists,
    pick,
    deltas,
    clientIp: ipOf,
  });
  // Last of the app's onRequest hooks (after Host, load and those of `register`, as the 405 of the
  // not-found handler was): another method on an API path is refused before its body is read.
  app.addHook('onRequest', deps.publish ? refuseOtherMethodsWithPut : refuseOtherMethods);

  app.get(
    FILES_PATH,
    { schema: FILES_ROUTE_SCHEMA },
    viaFastify(v1, () => undefined),
  );
  // A wildcard, so that every name (even one with `/` or `..`) goes through the checks in order.
  app.get<{ Params: { '*': string } }>(
    DATA_ROUTE,
    { schema: DATA_ROUTE_SCHEMA },
    viaFastify(v1, (request) => (request.params as { '*': string })['*']),
  );
  if (deps.publish) await registerPublishRoute(app, { ...deps.publish, v1, rate: deps.rateLimit ?? limits?.check, config });
  if (deps.feed) {
    const hub = createStreamHub({
      feed: deps.feed,
      heartbeatMs: config.changes.heartbeatMs,
      maxBufferedBytes: config.changes.maxBufferedBytes,
      onRevoked: state.keys.onRevoked,
      counters: deps.changeCounters,
    });
    // Streams never end by themselves: they end first, so that close() does not wait for them.
    app.addHook('preClose', (done) => {
      hub.closeAll();
      done();
    });
    registerChangeRoutes(app, {
      v1,
      feed: deps.feed,
      hub,
      published: state.published,
      maxWaitMs: config.changes.maxWaitMs,
      onRevoked: state.keys.onRevoked,
      streamsPerKey: config.changes.streamsPerKey,
      slots: deps.streamSlots,
      onWaiting: deps.changeCounters?.waiting,
      onTooManyStreams: deps.changeCounters?.tooManyStreams,
      onClientClosed: (line, ms) => {
        if (200 >= minLoggedStatus(config.reader.requestLog))
          log.info(requestLine(line.id, line.method, line.url, 200, ms, line.principalId, line.ip), REQUEST_LINE_MSG);
        deps.onFrontDoorResponse?.(STREAM_PATH, line.method, 200, ms);
      },
    });
  }
  registerHistory(app, { v1, redis: deps.redis, prefix: config.redis.prefix, store: deps.store, log });
  app.get(OPENAPI_PATH, { schema: OPENAPI_ROUTE_SCHEMA }, openApiHandler(app));
  app.get('/healthz', healthzHandler());
  app.get('/readyz', readyzHandler({ redis: deps.redis, store: deps.store, loaded: state.loaded }));

  await app.ready();
  if (config.reader.hotPath) {
    const door = createFrontDoor({
      handler: v1,
      unavailable: () => closing || app.isUnderPressure(),
      nextRequestId,
      clientIp: ipOf,
      log,
      minLoggedStatus: minLoggedStatus(config.reader.requestLog),
      observe: deps.onFrontDoorResponse,
    });
    routeThroughFrontDoor(app, door);
  }
  return app;
}

/** A /v1 route's Fastify handler: the v1 handler's reply, sent through Fastify's reply. */
function viaFastify(v1: V1Handler, nameOf: (request: FastifyRequest) => string | undefined) {
  return (request: FastifyRequest, reply: FastifyReply): FastifyReply | Promise<FastifyReply> => {
    const send = (r: V1Reply): FastifyReply => {
      request.principal = r.principal ?? null;
      return sendFlat(reply, r.status, r.headers, r.body);
    };
    const r = v1.resolve(request.raw as IncomingMessage, nameOf(request));
    return r instanceof Promise ? r.then(send) : send(r);
  };
}
