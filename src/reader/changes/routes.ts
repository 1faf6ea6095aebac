/**
 * The change endpoints, after the checks every /v1 endpoint shares (v1-handler.ts: credentials,
 * then the plan rate, counted once per request however long it waits or streams):
 *
 * - GET /v1/catalog: the key's files with their ETag, size, generated_at, published_at, and the
 *   change position they are current at: where a client starts its stream or long-poll.
 * - GET /v1/changes?since=P&wait=S&limit=N: the changes after P to the key's files, oldest first,
 *   and the position to ask for next; with `wait`, held until there is one (long-poll.ts).
 * - GET /v1/stream (text/event-stream): the same changes pushed as they happen, `id:` = position,
 *   resumed with Last-Event-ID (or ?since=P); `?conflate=MS` (at least the plan's `conflate`):
 *   at most one write of changes per MS, the latest change of each file (streams.ts).
 *
 * A position older than the log keeps, or ahead of the newest one (e.g. a log that was lost), is 410
 * with the oldest position kept and the current one: the client lists again and starts afresh.
 * Checking a position other than the head reads the log's bounds in Redis. With Redis away, a
 * position among the changes the reader holds is answered from them, any other gets 503 +
 * Retry-After within a few seconds (redis-reads.ts); the head is always answered from memory.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { MAX_CONFLATE_MS } from '../../config/types.js';
import { HttpProblem } from '../../errors.js';
import type { Principal } from '../../keys/ring.js';
import type { PublishedCache } from '../data/cache.js';
import { sendFlat } from '../problem.js';
import type { Admitted, V1Handler, V1Reply } from '../data/v1-handler.js';
import { createLongPolls } from './long-poll.js';
import { etagFor } from '../data/version.js';
import { CATALOG_ROUTE_SCHEMA, CHANGES_ROUTE_SCHEMA, STREAM_ROUTE_SCHEMA } from './openapi.js';
import type { LogBounds } from '../../catalog/change-log.js';
import type { ChangeFeed } from './feed.js';
import type { StreamSlots } from './stream-slots.js';
import type { StreamHub } from './streams.js';
import { openStreamSink, type StreamSink } from './stream-sink.js';
import { jsonAnswer } from '../data/json-answer.js';

/** What a stream's request line says. */
export interface StreamRequestLine {
  readonly id: string;
  readonly method: string;
  readonly url: string;
  readonly principalId: string | undefined;
  readonly ip: string | undefined;
}

export const CATALOG_PATH = '/v1/catalog';
export const CHANGES_PATH = '/v1/changes';
export const STREAM_PATH = '/v1/stream';

export interface ChangeRoutesDeps {
  readonly v1: V1Handler;
  readonly feed: ChangeFeed;
  readonly hub: StreamHub;
  readonly published: PublishedCache;
  readonly maxWaitMs: number;
  /** Told of a revoked key id (KeyRing.onRevoked): its held long-polls end with 401, as its streams end. */
  readonly onRevoked: (listener: (id: string) => void) => () => void;
  /** Open streams per key when its plan does not say. */
  readonly streamsPerKey: number;
  /** The keys' streams counted across readers (without it: on this reader only). */
  readonly slots?: StreamSlots | undefined;
  /** Long-polls waiting now (metrics). */
  readonly onWaiting?: ((delta: number) => void) | undefined;
  /** A stream refused for the key's limit (counted with the other 429s). */
  readonly onTooManyStreams?: (() => void) | undefined;
  /**
   * A stream its client closed: it gets the request line and count every answer gets here, as
   * Fastify gives them only to a response that finishes (a stream the server ends).
   */
  readonly onClientClosed?: ((line: StreamRequestLine, ms: number) => void) | undefined;
}

const STARTING = new HttpProblem('unavailable', 'The change log is not reachable yet; retry in a moment.', { 'retry-after': '1' });
const MAX_LIMIT = 1000;
const DEFAULT_LIMIT = 100;

const json = jsonAnswer;

function changesAnswer(r: { events: readonly { json: unknown }[]; next: number }) {
  return json({ changes: r.events.map((e) => e.json), next: r.next });
}

/** A non-negative integer from a query or header value; undefined when absent, NaN when malformed. */
function position(value: unknown): number | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string' || !/^\d{1,15}$/.test(value)) return Number.NaN;
  return Number(value);
}

/** The stream's `conflate` (ms): 0 when absent, NaN when malformed or out of range. */
function conflateOf(value: unknown): number {
  if (value === undefined || value === '') return 0;
  if (typeof value !== 'string' || !/^\d{1,5}$/.test(value)) return Number.NaN;
  const ms = Number(value);
  return ms > MAX_CONFLATE_MS ? Number.NaN : ms;
}

export function registerChangeRoutes(app: FastifyInstance, deps: ChangeRoutesDeps): void {
  const { v1, feed, hub, published, maxWaitMs } = deps;
  const longPolls = createLongPolls({ v1, feed, onRevoked: deps.onRevoked, onWaiting: deps.onWaiting, answer: changesAnswer });
  // A stopping reader answers its held long-polls at once rather than waiting out their `wait`.
  app.addHook('preClose', (done) => {
    longPolls.endAll();
    done();
  });

  const send = (request: FastifyRequest, reply: FastifyReply, r: V1Reply): FastifyReply => {
    request.principal = r.principal ?? null;
    return sendFlat(reply, r.status, r.headers, r.body);
  };
  /** Run `then` once the request is admitted; a refusal is sent as it is. */
  const admitted = async (request: FastifyRequest, reply: FastifyReply, then: (a: Admitted) => Promise<V1Reply | undefined> | V1Reply | undefined) => {
    const a = await v1.admit(request.raw as IncomingMessage);
    if ('status' in a) return send(request, reply, a);
    request.principal = a.principal;
    if (!feed.started) return send(request, reply, v1.replyFor(a, STARTING));
    const r = await then(a);
    return r === undefined ? reply : send(request, reply, r);
  };

  /** undefined when `since` can be resumed from; else the 410 (or 400) that says why not. */
  const unresumable = async (since: number): Promise<HttpProblem | undefined> => {
    if (Number.isNaN(since)) return new HttpProblem('bad_request', 'A position is a non-negative integer (the `position` of a change, or of GET /v1/catalog).');
    const head = feed.position;
    if (since === head) return undefined;
    let bounds: LogBounds;
    try {
      bounds = await feed.bounds();
    } catch (err) {
      // Redis away (a 503): a position the reader still holds the changes after is answered from them.
      if (err instanceof HttpProblem && feed.remembers(since)) return undefined;
      throw err;
    }
    const { first, last } = bounds;
    const oldest = first ?? last + 1;
    if (since > Math.max(head, last) || since < oldest - 1) {
      return new HttpProblem(
        'position_gone',
        since > head
          ? `Position ${since} is ahead of the newest position, ${head}: no change has had it yet (a position from another deployment, or from before the change log was lost). List the files again (GET /v1/catalog) and continue from its position.`
          : `Position ${since} is older than the change log keeps (oldest ${oldest}). List the files again (GET /v1/catalog) and continue from its position.`,
        {},
        { oldest, position: head },
      );
    }
    return undefined;
  };

  app.get(CATALOG_PATH, { schema: CATALOG_ROUTE_SCHEMA }, (request, reply) =>
    admitted(request, reply, (a) => {
      const files = [];
      for (const name of published.filenames()) {
        if (!a.principal.allows(name)) continue;
        const e = published.get(name)?.entry;
        if (e)
          files.push({
            filename: name,
            etag: etagFor(e.sha256, 'identity'),
            sha256: e.sha256,
            size: e.size,
            generated_at: e.generatedAt,
            published_at: e.publishedAt,
          });
      }
      return v1.replyFor(a, json({ position: feed.position, files }));
    }),
  );

  app.get<{ Querystring: Record<string, string | undefined> }>(CHANGES_PATH, { schema: CHANGES_ROUTE_SCHEMA }, (request, reply) =>
    admitted(request, reply, async (a) => {
      const q = request.query;
      const since = position(q.since) ?? feed.position;
      const wait = q.wait === undefined ? 0 : Number(q.wait);
      const limit = q.limit === undefined ? DEFAULT_LIMIT : Number(q.limit);
      if (!Number.isFinite(wait) || wait < 0 || wait * 1000 > maxWaitMs) {
        return v1.replyFor(a, new HttpProblem('bad_request', `wait is a number of seconds from 0 to ${maxWaitMs / 1000}.`));
      }
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
        return v1.replyFor(a, new HttpProblem('bad_request', `limit is an integer from 1 to ${MAX_LIMIT}.`));
      const gone = await unresumable(since);
      if (gone) return v1.replyFor(a, gone);
      const now = await feed.since(since, a.principal.allows, limit);
      // Revoked while the log was read: nothing more for this key.
      const revoked = v1.revokedSince(a.principal);
      if (revoked) return v1.replyFor(a, revoked);
      if (now.events.length > 0 || wait === 0) return v1.replyFor(a, changesAnswer(now));
      return v1.replyFor(a, await longPolls.wait(reply, a.principal, now.next, limit, wait * 1000));
    }),
  );

  /**
   * A stream from its head on. Made outside the route's handler: what it keeps (its sink, its
   * slot, its request line) must not hold the request and reply objects the handler's scope does.
   */
  const startStream = (principal: Principal, out: StreamSink, since: number, conflateMs: number, line: StreamRequestLine, slot: string | undefined) => {
    const start = performance.now();
    out.onClose((byServer) => {
      if (slot !== undefined) deps.slots!.release(principal.rateKey, slot);
      if (!byServer) deps.onClientClosed?.(line, performance.now() - start);
    });
    return hub.start(principal, out, since, (after) => feed.since(after, principal.allows, 500), conflateMs);
  };

  // No HEAD: a stream has no headers-only form.
  app.get<{ Querystring: Record<string, string | undefined> }>(STREAM_PATH, { schema: STREAM_ROUTE_SCHEMA, exposeHeadRoute: false }, (request, reply) =>
    admitted(request, reply, async (a) => {
      const limit = a.principal.streams ?? deps.streamsPerKey;
      const tooMany = () => {
        deps.onTooManyStreams?.();
        return v1.replyFor(a, new HttpProblem('too_many_streams', `This key may keep ${limit} streams open at once; close one first.`, { 'retry-after': '5' }));
      };
      if (hub.countFor(a.principal) >= limit) return tooMany();
      const lastEventId = request.headers['last-event-id'];
      const since = position(typeof lastEventId === 'string' ? lastEventId : request.query.since) ?? feed.position;
      const asked = conflateOf(request.query.conflate);
      if (Number.isNaN(asked))
        return v1.replyFor(a, new HttpProblem('bad_request', `conflate is a whole number of milliseconds from 0 to ${MAX_CONFLATE_MS}.`));
      const conflateMs = Math.max(asked, a.principal.conflateMs ?? 0);
      const gone = await unresumable(since);
      if (gone) return v1.replyFor(a, gone);
      const rateKey = a.principal.rateKey;
      const taken = deps.slots ? await deps.slots.take(rateKey, limit) : undefined;
      if (taken === 'full') return tooMany();
      reply.hijack();
      const res = reply.raw;
      if (a.rateHeaders) for (const k in a.rateHeaders) res.setHeader(k, a.rateHeaders[k]!);
      // Gone while the slot was taken: give it back at once.
      if (res.destroyed) {
        if (taken) deps.slots!.release(rateKey, taken.slot);
        return undefined;
      }
      // What the request line of a stream its client closed needs, read now: once the client has
      // gone its socket no longer says.
      const line = { id: request.id, method: request.method, url: request.url, principalId: a.principal.id, ip: request.ip };
      await startStream(a.principal, openStreamSink(res), since, conflateMs, line, taken === undefined ? undefined : taken.slot);
      return undefined;
    }),
  );
}
