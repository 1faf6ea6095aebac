/**
 * PUT /v1/data/{filename}: publishing over HTTPS through the pipeline a drop takes (the
 * PublishPort: src/ingest/http/http-publish.ts behind it). Checks, in order: loaded (503), credentials
 * (401), a key that may publish at all (403), its publish rate (429), a feed filename (400), one of
 * its publish patterns (403), the content coding (415), Content-Length (413), the key's uploads
 * at once (429), the reader's uploads at once (503); then the body arrives within bounds (413 while streaming, 408), and the answer waits for
 * the outcome: 201 published, 200 unchanged, 409 superseded, 422 rejected, 504 not settled in
 * time (it stays queued). `?dry_run=1` validates and answers without publishing. Every answer is
 * JSON: the outcome in the body, so clients need not read headers.
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config.js';
import { HttpProblem } from '../../errors.js';
import { parseFilename, type FeedRegistry } from '../../feeds/registry.js';
import type { Principal } from '../../keys/ring.js';
import { DATA_PREFIX, DATA_ROUTE } from '../data/data-route.js';
import { sendFlat } from '../problem.js';
import type { DryRunOutcome, PublishOutcome, PublishPort } from '../../ports/publish.js';
import { PUT_ROUTE_SCHEMA } from './publish-openapi.js';
import type { RateLimitCheck } from '../limits/rate-limit.js';
import { ABORTED, readUpload, tooLarge } from './upload.js';
import { etagFor } from '../data/version.js';
import { problemReply, revokedProblem, type V1Handler, type V1Reply } from '../data/v1-handler.js';

export interface PublishRouteDeps {
  readonly v1: V1Handler;
  readonly port: PublishPort;
  readonly registry: FeedRegistry;
  readonly config: Pick<Config, 'limits' | 'publish'>;
  /** The plan rate check (limits.ts), counted here against the key's publisher principal. */
  readonly rate?: RateLimitCheck | undefined;
  /** Told of every answered PUT (metrics: oddsfiles_http_publish_total). */
  readonly onOutcome?: ((outcome: string) => void) | undefined;
}

type Rated = Readonly<Record<string, string>> | undefined;

const NOT_A_PUBLISHER = 'This key may not publish. Publishing needs a key made with `oddsfiles keys create --publish PATTERN`.';
const NOT_YOURS = 'This key may not publish this filename (it matches none of its publish patterns).';

/** Register the route (in a context of its own: the body is left unread for the handler to stream). */
export async function registerPublishRoute(app: FastifyInstance, deps: PublishRouteDeps): Promise<void> {
  await app.register(async (sub) => {
    sub.removeAllContentTypeParsers();
    sub.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
    // The body is read as sent, whatever its Content-Type says: without this, Fastify answers a
    // Content-Type it cannot parse with 415 before the handler, so before the key is checked.
    sub.addHook('onRequest', (request, _reply, done) => {
      delete request.raw.headers['content-type'];
      done();
    });
    sub.put<{ Params: { '*': string } }>(DATA_ROUTE, { schema: PUT_ROUTE_SCHEMA }, createPublishHandler(deps));
  });
}

export function createPublishHandler(deps: PublishRouteDeps) {
  const { v1, port, registry, config } = deps;
  const maxBytes = config.limits.maxFileBytes;
  let uploads = 0;
  /** Uploads arriving per publisher key id. */
  const perKey = new Map<string, number>();

  return async function putData(request: FastifyRequest<{ Params: { '*': string } }>, reply: FastifyReply): Promise<FastifyReply> {
    const req = request.raw as IncomingMessage;
    const http2 = req.httpVersionMajor >= 2;
    const send = (r: V1Reply, outcome: string): FastifyReply => {
      request.principal = r.principal ?? null;
      deps.onOutcome?.(outcome);
      const headers = http2 ? dropConnectionHeader(r.headers) : r.headers;
      return sendFlat(reply, r.status, headers, r.body);
    };
    const refuse = (p: HttpProblem, principal?: Principal, rated?: Rated) => send(problemReply(p, principal, rated), 'refused');

    const who = await v1.identify(req);
    if ('status' in who) return send(who, 'refused');
    const publisher = who.publisher;
    if (!publisher) return refuse(new HttpProblem('forbidden', NOT_A_PUBLISHER), who);
    const d = deps.rate ? await deps.rate(publisher) : undefined;
    const rated = d?.headers;
    if (d && !d.allowed) {
      const headers: Record<string, string> = { ...d.headers };
      if (d.retryAfterS !== undefined) headers['retry-after'] = String(Math.max(0, Math.ceil(d.retryAfterS)));
      return refuse(new HttpProblem('rate_limited', d.detail ?? 'Too many PUTs for this key; back off and retry later.', headers), who);
    }
    const name = request.params['*'];
    if (!parseFilename(registry, name)) {
      return refuse(
        new HttpProblem('bad_request', `${JSON.stringify(name.slice(0, 200))} is not a feed filename (e.g. site_live_northwind_soccer.json).`),
        who,
        rated,
      );
    }
    if (!publisher.allows(name)) return refuse(new HttpProblem('forbidden', NOT_YOURS), who, rated);
    const coding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
    if (coding !== 'identity' && coding !== 'gzip' && coding !== 'x-gzip') {
      return refuse(
        new HttpProblem('unsupported_media_type', `Content-Encoding ${JSON.stringify(coding)} is not accepted; send gzip or no coding.`),
        who,
        rated,
      );
    }
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > maxBytes) return refuse(tooLarge(maxBytes, 'The body', true), who, rated);
    // Per key first, so that one key's stalled uploads cannot hold every slot of the reader.
    const mine = perKey.get(publisher.id) ?? 0;
    const cap = publisher.uploads ?? config.publish.uploadsPerKey;
    if (mine >= cap) {
      const detail = `This key already has ${mine} uploads arriving on this server (its limit: ${cap}); retry once one has finished.`;
      return refuse(new HttpProblem('too_many_uploads', detail, { 'retry-after': '1' }), who, rated);
    }
    if (uploads >= config.publish.maxUploads) {
      return refuse(new HttpProblem('unavailable', 'Too many uploads at once on this reader; retry in a moment.', { 'retry-after': '1' }), who, rated);
    }
    uploads++;
    perKey.set(publisher.id, mine + 1);
    try {
      // Without a body and a Content-Type, Fastify runs no parser: the request itself is the (empty) body.
      const stream = (request.body as Readable | undefined) ?? req;
      const body = await readUpload(stream, { maxBytes, timeoutMs: config.publish.uploadTimeoutMs, gzip: coding !== 'identity' });
      if (body === ABORTED) {
        deps.onOutcome?.('refused');
        return reply;
      }
      if (body instanceof HttpProblem) {
        // The rest of the body is discarded as it comes; the connection ends a second after the answer.
        reply.raw.once('finish', () => setTimeout(() => req.destroy(), 1000).unref());
        return refuse(body, who, rated);
      }
      const receivedAt = new Date();
      const query = request.query as Record<string, string | undefined>;
      const unavailable = (err: unknown, what: string, detail: string) => {
        request.log.warn({ err: { message: (err as Error).message }, filename: name }, what);
        return send(problemReply(new HttpProblem('unavailable', detail, { 'retry-after': '5' }), who, rated), 'failed');
      };
      if (query.dry_run === '1' || query.dry_run === 'true') {
        let checked: DryRunOutcome;
        try {
          checked = await port.check(name, body, receivedAt);
        } catch (err) {
          return unavailable(err, 'a dry run could not be checked', 'The document could not be checked (Redis unavailable); retry in a moment.');
        }
        return send(dryRunReply(name, checked, who, rated), 'dry_run');
      }
      let outcome: PublishOutcome;
      try {
        // Queued only while the key is still valid: revoked while the body arrived, nothing is published.
        outcome = await port.submit(name, body, receivedAt, () => v1.revokedSince(who) === undefined);
      } catch (err) {
        return unavailable(err, 'a PUT could not be published', 'The document could not be queued or settled (store or Redis unavailable); retry in a moment.');
      }
      if (outcome.outcome === 'withdrawn') {
        const p = revokedProblem('The API key in the X-API-Key header was revoked while the upload arrived; nothing was published.');
        return send(problemReply(p, who, rated), 'refused');
      }
      return send(outcomeReply(name, outcome, who, rated), outcome.outcome);
    } finally {
      uploads--;
      const left = (perKey.get(publisher.id) ?? 1) - 1;
      if (left > 0) perKey.set(publisher.id, left);
      else perKey.delete(publisher.id);
    }
  };
}

function jsonReply(status: number, body: Record<string, unknown>, principal: Principal, rated: Rated, extra: string[] = []): V1Reply {
  const payload = Buffer.from(JSON.stringify(body));
  const headers: string[] = [];
  if (rated) for (const k in rated) headers.push(k, rated[k]!);
  headers.push(...extra, 'content-type', 'application/json', 'cache-control', 'no-store', 'content-length', String(payload.length));
  return { status, headers, body: payload, principal };
}

function outcomeReply(name: string, o: Exclude<PublishOutcome, { outcome: 'withdrawn' }>, principal: Principal, rated: Rated): V1Reply {
  switch (o.outcome) {
    case 'published':
    case 'unchanged': {
      const etag = etagFor(o.current.sha256, 'identity');
      const body = { outcome: o.outcome, filename: name, etag, generated_at: o.current.generatedAt };
      const location = o.outcome === 'published' ? ['location', `${DATA_PREFIX}${encodeURIComponent(name)}`] : [];
      return jsonReply(o.outcome === 'published' ? 201 : 200, body, principal, rated, ['etag', etag, ...location]);
    }
    case 'superseded':
      return problemReply(
        new HttpProblem(
          'superseded',
          `A newer version is published (generated_at ${o.current.generatedAt}); this one (generated_at ${o.generatedAt}) was not published.`,
          {},
          {
            outcome: 'superseded',
            filename: name,
            generated_at: o.generatedAt,
            published_generated_at: o.current.generatedAt,
            published_etag: etagFor(o.current.sha256, 'identity'),
          },
        ),
        principal,
        rated,
      );
    case 'rejected':
      return problemReply(
        new HttpProblem(
          'rejected',
          o.detail,
          {},
          { outcome: 'rejected', filename: name, reason: o.reason, ...(o.rejectionId ? { rejection_id: o.rejectionId } : {}) },
        ),
        principal,
        rated,
      );
    case 'pending':
      return problemReply(
        new HttpProblem(
          'publish_pending',
          'The document is queued but no worker settled it in time (publish.settle_timeout). It will be settled; sending the same bytes again is safe.',
          { 'retry-after': '5' },
          { outcome: 'pending', filename: name },
        ),
        principal,
        rated,
      );
  }
}

function dryRunReply(name: string, o: DryRunOutcome, principal: Principal, rated: Rated): V1Reply {
  if (o.outcome === 'rejected') {
    return problemReply(new HttpProblem('rejected', o.detail, {}, { outcome: 'rejected', filename: name, reason: o.reason, dry_run: true }), principal, rated);
  }
  return jsonReply(
    200,
    {
      outcome: 'valid',
      dry_run: true,
      would: o.would,
      filename: name,
      generated_at: o.generatedAt,
      ...(o.current ? { published_generated_at: o.current.generatedAt, published_etag: etagFor(o.current.sha256, 'identity') } : {}),
    },
    principal,
    rated,
  );
}

/** HTTP/2 forbids connection-specific headers. */
function dropConnectionHeader(headers: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) if (headers[i] !== 'connection') out.push(headers[i]!, headers[i + 1]!);
  return out;
}
