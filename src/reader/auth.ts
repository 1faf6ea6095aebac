/**
 * Authentication, the first check of every /v1 request. Sets request.principal, or answers:
 *
 * - a marketplace's proxy secret header (CONTRACT §5, src/keys/marketplace.ts): right secret →
 *   that subscriber on the mapped plan (X-API-Key is not looked up); wrong secret → 401; no
 *   subscriber header → 401; a subscription plan that is not mapped → 403;
 * - otherwise the X-API-Key header against the keys held in memory: unknown, revoked or missing
 *   → 401;
 * - with an address lockout (limits.ts): a failed authentication (wrong key or wrong marketplace
 *   secret) is counted per client address, and once the address is over its limit every request
 *   from it that presents credentials gets 429 + Retry-After until the window passes, valid key
 *   included. Requests without credentials, and requests with a valid marketplace secret, are
 *   neither counted nor locked out.
 *
 * 503 while the keys are still loading.
 */
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { HttpProblem } from '../errors.js';
import type { MarketplaceAuthenticator } from '../keys/marketplace.js';
import type { KeyRing, Principal } from '../keys/ring.js';
import type { AuthFailureGate } from './limits.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who the request acts for, once authenticated. */
    principal: Principal | null;
  }
}

export const API_KEY_HEADER = 'x-api-key';
const CHALLENGE = { 'www-authenticate': 'ApiKey header="X-API-Key"' };

export type AuthFailure = 'missing' | 'unknown_or_revoked' | 'marketplace_secret' | 'marketplace_user';

export interface AuthOptions {
  readonly ring: KeyRing;
  readonly isLoaded: () => boolean;
  /** Told of every failed authentication (metrics). */
  readonly onFailed?: ((reason: AuthFailure) => void) | undefined;
  readonly marketplaces?: MarketplaceAuthenticator | undefined;
  /** The lockout of addresses with too many failed authentications. */
  readonly gate?: AuthFailureGate | undefined;
}

const MISSING = 'Send your API key in the X-API-Key header.';
const INVALID = 'The API key in the X-API-Key header is not valid (unknown or revoked).';
const BAD_SECRET = 'The marketplace proxy secret is not valid.';

function lockedOut(seconds: number): HttpProblem {
  return new HttpProblem('rate_limited', `Too many failed authentications from your address; retry after ${seconds} s.`, { 'retry-after': String(seconds) });
}

export function authHook(options: AuthOptions) {
  const { ring, isLoaded, onFailed, gate } = options;
  const marketplaces = options.marketplaces?.enabled ? options.marketplaces : undefined;

  /** A wrong credential: 401, or 429 once the address is over its failure limit. */
  const refuse = (request: FastifyRequest, detail: string, done: HookHandlerDoneFunction): void => {
    if (!gate) return done(new HttpProblem('unauthorized', detail, CHALLENGE));
    gate.failed(request).then(
      (wait) => done(wait === undefined ? new HttpProblem('unauthorized', detail, CHALLENGE) : lockedOut(wait)),
      (err: unknown) => done(err as Error),
    );
  };

  return function authenticate(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
    if (!isLoaded()) {
      return done(new HttpProblem('unavailable', 'The service is starting; retry in a moment.', { 'retry-after': '1' }));
    }
    if (marketplaces) {
      const m = marketplaces.authenticate(request.headers);
      switch (m.kind) {
        case 'ok':
          request.principal = m.principal;
          return done();
        case 'bad_secret':
          onFailed?.('marketplace_secret');
          return refuse(request, BAD_SECRET, done);
        case 'no_user':
          onFailed?.('marketplace_user');
          return done(new HttpProblem('unauthorized', `The marketplace request names no subscriber (the ${m.userHeader} header is missing).`, CHALLENGE));
        case 'unmapped_plan':
          return done(new HttpProblem('forbidden', 'This marketplace subscription plan gives no access to this API.'));
        case 'none':
          break;
      }
    }
    const header = request.headers[API_KEY_HEADER];
    const principal = ring.authenticate(header);
    if (principal) {
      const wait = gate?.locked(request);
      if (wait !== undefined) return done(lockedOut(wait));
      request.principal = principal;
      return done();
    }
    if (header === undefined || header === '') {
      onFailed?.('missing');
      return done(new HttpProblem('unauthorized', MISSING, CHALLENGE));
    }
    onFailed?.('unknown_or_revoked');
    refuse(request, INVALID, done);
  };
}
