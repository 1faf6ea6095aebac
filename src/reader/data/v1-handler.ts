/**
 * The only implementation of GET (and HEAD) /v1/files and /v1/data/{filename}: every check in
 * order, as plain data. Credentials (401; a marketplace plan not mapped: 403; a failed attempt from
 * an address locked out after too many: 429), the plan rate (429), published (404), allow-list (403),
 * then the answer (200, or 304 when the request's validators match). Once the rate is counted its
 * headers go on every answer, refusals included.
 *
 * `resolve` returns a V1Reply (status, headers as a flat list, body), at once when it can (the
 * common case: keys, rates and files are in memory) or as a promise when it must wait (a rate
 * lease or a failed authentication counted in Redis, a compressed variant being made). It is sent
 * by one of two senders, neither of which decides anything: the front door (front-door.ts, on
 * Node's request event) or the Fastify routes (app.ts), which take the forms of a request the
 * front door leaves to Fastify.
 */
import type { IncomingMessage } from 'node:http';
import { HttpProblem } from '../../errors.js';
import type { KeyRing, Principal } from '../../keys/ring.js';
import type { MarketplaceAuthenticator } from '../../keys/marketplace.js';
import type { FileLists } from './allow.js';
import type { Answer } from './answer.js';
import type { PublishedCache } from './cache.js';
import { dataAnswer, type VariantPicker } from './data-route.js';
import { filesAnswer } from './files-route.js';
import type { Deltas } from '../deltas/delta.js';
import type { AuthFailureGate } from '../limits/limits.js';
import { problemHeaders, problemPayload } from '../../problem-json.js';
import type { RateDecision, RateLimitCheck } from '../limits/rate-limit.js';
import type { Version } from './version.js';

export const API_KEY_HEADER = 'x-api-key';
const CHALLENGE = { 'www-authenticate': 'ApiKey header="X-API-Key"' };

export type AuthFailure = 'missing' | 'unknown_or_revoked' | 'marketplace_secret' | 'marketplace_user';

/** What the handler answers: an Answer, or a problem, with the principal it acted for (the request line's keyId). */
export interface V1Reply {
  readonly status: number;
  /** Response headers as [name, value, name, value, ...], names in lower case, Content-Length last when there is a body. */
  readonly headers: readonly string[];
  readonly body: Buffer | undefined;
  readonly principal: Principal | undefined;
}

export interface V1HandlerDeps {
  readonly ring: KeyRing;
  readonly isLoaded: () => boolean;
  readonly marketplaces?: MarketplaceAuthenticator | undefined;
  /** The lockout of addresses with too many failed authentications (limits.ts). */
  readonly gate?: AuthFailureGate | undefined;
  /** Told of every failed authentication (metrics). */
  readonly onAuthFailed?: ((reason: AuthFailure) => void) | undefined;
  /** The plan rate (limits.ts); without one every request passes. */
  readonly rate?: RateLimitCheck | undefined;
  readonly published: PublishedCache;
  readonly lists: FileLists;
  readonly pick: VariantPicker;
  /** Deltas (RFC 3229) for requests with A-IM (delta.ts); without it they get the usual answer. */
  readonly deltas?: Deltas | undefined;
  /** The client address (trust_proxy applied), for the lockout. */
  readonly clientIp: (req: IncomingMessage) => string | undefined;
}

export interface V1Handler {
  /** The reply to a GET of /v1/files (`name` undefined) or of /v1/data/{name} (`name` decoded). */
  resolve(req: IncomingMessage, name: string | undefined): V1Reply | Promise<V1Reply>;
  /**
   * The checks every /v1 endpoint starts with, in order: loaded (503), credentials (401/403/429
   * lockout), the plan rate, counted once (429). Admitted, or the reply that refuses.
   */
  admit(req: IncomingMessage): Admitted | V1Reply | Promise<Admitted | V1Reply>;
  /** The reply of an admitted request: `a` after the rate's headers. */
  replyFor(admitted: Admitted, a: Answer | HttpProblem): V1Reply;
  /**
   * Loaded (503) and credentials (401/403/429 lockout) only, without counting the plan rate: for
   * an endpoint that counts another rate (PUT /v1/data counts the key's publish rate).
   */
  identify(req: IncomingMessage): Principal | V1Reply | Promise<V1Reply>;
  /**
   * Why `principal` may not read anything of `name` (404 not published, 403 not on its
   * allow-list), as GET /v1/data answers; undefined when it may. Every endpoint about one file
   * asks this, so that they all refuse a name alike.
   */
  refusal(principal: Principal, name: string): HttpProblem | undefined;
  /**
   * The 401 for a request admitted with a key revoked since (a long-poll held, an upload not yet
   * queued), or undefined while the key is valid.
   */
  revokedSince(principal: Principal): HttpProblem | undefined;
}

/** A request that passed the checks every /v1 endpoint shares. */
export interface Admitted {
  readonly principal: Principal;
  /** The plan rate's headers, for whatever the endpoint answers. */
  readonly rateHeaders: Readonly<Record<string, string>> | undefined;
}

const MISSING = 'Send your API key in the X-API-Key header.';
const INVALID = 'The API key in the X-API-Key header is not valid (unknown or revoked).';
const BAD_SECRET = 'The marketplace proxy secret is not valid.';
const NOT_PUBLISHED = 'No file is published under this name. GET /v1/files lists yours.';
const NOT_ALLOWED = 'This file is not on the allow-list of your key.';
const RATE_DETAIL = 'Too many requests for this key; back off and retry later.';

const STARTING = problemReply(new HttpProblem('unavailable', 'The service is starting; retry in a moment.', { 'retry-after': '1' }));
const LOADING = new HttpProblem('unavailable', 'This file is being loaded; retry in a moment.', { 'retry-after': '1' });

/** A problem as a reply, after the rate's headers when the rate was counted. */
export function problemReply(problem: HttpProblem, principal?: Principal, rateHeaders?: Readonly<Record<string, string>>): V1Reply {
  return reply(problem.status, problemHeaders(problem), problemPayload(problem), principal, rateHeaders);
}

/** The rate-limit headers first (the order clients have always seen), then the answer's own, then Content-Length. */
function reply(
  status: number,
  own: readonly string[],
  body: Buffer | undefined,
  principal: Principal | undefined,
  rateHeaders: Readonly<Record<string, string>> | undefined,
): V1Reply {
  const headers: string[] = [];
  if (rateHeaders !== undefined) for (const k in rateHeaders) headers.push(k, rateHeaders[k]!);
  for (let i = 0; i < own.length; i++) headers.push(own[i]!);
  if (body !== undefined) headers.push('content-length', String(body.length));
  return { status, headers, body, principal };
}

/** The 401 of a request whose key was revoked while it was under way. */
export function revokedProblem(detail = 'The API key in the X-API-Key header was revoked while this request was under way.'): HttpProblem {
  return new HttpProblem('unauthorized', detail, CHALLENGE);
}

function lockedOut(seconds: number): HttpProblem {
  return new HttpProblem('rate_limited', `Too many failed authentications from your address; retry after ${seconds} s.`, { 'retry-after': String(seconds) });
}

export function createV1Handler(deps: V1HandlerDeps): V1Handler {
  const { ring, isLoaded, gate, onAuthFailed, rate, published, lists, pick, clientIp, deltas } = deps;
  const marketplaces = deps.marketplaces?.enabled ? deps.marketplaces : undefined;

  /** A wrong credential: 401, or 429 once the address is over its failure limit. */
  const refuse = (req: IncomingMessage, detail: string): V1Reply | Promise<V1Reply> => {
    const unauthorized = problemReply(new HttpProblem('unauthorized', detail, CHALLENGE));
    if (!gate) return unauthorized;
    return gate.failed(clientIp(req)).then((wait) => (wait === undefined ? unauthorized : problemReply(lockedOut(wait))));
  };

  /** The principal of a request, or the reply that refuses it. */
  const authenticate = (req: IncomingMessage): Principal | V1Reply | Promise<V1Reply> => {
    const h = req.headers;
    if (marketplaces) {
      const m = marketplaces.authenticate(h);
      switch (m.kind) {
        case 'ok':
          return m.principal;
        case 'bad_secret':
          onAuthFailed?.('marketplace_secret');
          return refuse(req, BAD_SECRET);
        case 'no_user':
          onAuthFailed?.('marketplace_user');
          return problemReply(
            new HttpProblem('unauthorized', `The marketplace request names no subscriber (the ${m.userHeader} header is missing).`, CHALLENGE),
          );
        case 'unmapped_plan':
          return problemReply(new HttpProblem('forbidden', 'This marketplace subscription plan gives no access to this API.'));
        case 'none':
          break;
      }
    }
    const header = h[API_KEY_HEADER];
    const principal = ring.authenticate(header);
    // A valid key is served even from a locked-out address: the lockout refuses failing attempts only.
    if (principal) return principal;
    if (header === undefined || header === '') {
      onAuthFailed?.('missing');
      return problemReply(new HttpProblem('unauthorized', MISSING, CHALLENGE));
    }
    onAuthFailed?.('unknown_or_revoked');
    return refuse(req, INVALID);
  };

  /** The one rule of which names a key may read: published (or being loaded), then its allow-list. */
  const refusalOf = (principal: Principal, name: string, version: Version | undefined): HttpProblem | undefined => {
    if (version === undefined && !published.isPending(name)) return new HttpProblem('not_found', NOT_PUBLISHED);
    if (!principal.allows(name)) return new HttpProblem('forbidden', NOT_ALLOWED);
    return undefined;
  };

  /** The reply after the rate allowed the request (its headers added by the caller). */
  const serve = (req: IncomingMessage, principal: Principal, name: string | undefined): Answer | HttpProblem | Promise<Answer> => {
    if (name === undefined) return filesAnswer(lists.forPrincipal(principal), req.headers);
    const version = published.get(name);
    const refused = refusalOf(principal, name, version);
    if (refused) return refused;
    if (version === undefined) return LOADING;
    if (deltas && req.headers['a-im'] !== undefined) return deltas.answer(version, () => pick(version, req.headers['accept-encoding']), req.headers);
    const variant = pick(version, req.headers['accept-encoding']);
    return variant instanceof Promise ? variant.then((v) => dataAnswer(version, v, req.headers)) : dataAnswer(version, variant, req.headers);
  };

  const afterRate = (principal: Principal, d: RateDecision): Admitted | V1Reply => {
    if (d.allowed) return { principal, rateHeaders: d.headers };
    const headers: Record<string, string> = { ...d.headers };
    if (d.retryAfterS !== undefined) headers['retry-after'] = String(Math.max(0, Math.ceil(d.retryAfterS)));
    return problemReply(new HttpProblem('rate_limited', d.detail ?? RATE_DETAIL, headers), principal);
  };

  const admit = (req: IncomingMessage): Admitted | V1Reply | Promise<Admitted | V1Reply> => {
    if (!isLoaded()) return STARTING;
    const who = authenticate(req);
    if (who instanceof Promise || 'status' in who) return who;
    const d = rate ? rate(who) : undefined;
    if (d === undefined) return { principal: who, rateHeaders: undefined };
    if (d instanceof Promise) return d.then((decision) => afterRate(who, decision));
    return afterRate(who, d);
  };

  const replyFor = (admitted: Admitted, a: Answer | HttpProblem): V1Reply => toReply(a, admitted.principal, admitted.rateHeaders);

  const resolveAdmitted = (req: IncomingMessage, name: string | undefined, admitted: Admitted | V1Reply): V1Reply | Promise<V1Reply> => {
    if ('status' in admitted) return admitted;
    const out = serve(req, admitted.principal, name);
    if (out instanceof Promise) return out.then((a) => replyFor(admitted, a));
    return replyFor(admitted, out);
  };

  return {
    resolve(req, name) {
      const admitted = admit(req);
      if (admitted instanceof Promise) return admitted.then((a) => resolveAdmitted(req, name, a));
      return resolveAdmitted(req, name, admitted);
    },
    admit,
    replyFor,
    identify: (req) => (isLoaded() ? authenticate(req) : STARTING),
    refusal: (principal, name) => refusalOf(principal, name, published.get(name)),
    revokedSince: (principal) => (ring.isRevoked(principal.id) ? revokedProblem() : undefined),
  };
}

function toReply(a: Answer | HttpProblem, principal: Principal, rateHeaders: Readonly<Record<string, string>> | undefined): V1Reply {
  if (a instanceof HttpProblem) return problemReply(a, principal, rateHeaders);
  return reply(a.status, a.headers, a.body, principal, rateHeaders);
}
