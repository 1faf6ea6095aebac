/**
 * Authentication, the first check of every /v1 request: the X-API-Key header against the keys
 * held in memory. Sets request.principal; anything else is a 401 (503 while still starting).
 */
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { HttpProblem } from '../errors.js';
import type { KeyRing, Principal } from '../keys/ring.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who the request acts for, once authenticated. */
    principal: Principal | null;
  }
}

export const API_KEY_HEADER = 'x-api-key';
const CHALLENGE = { 'www-authenticate': 'ApiKey header="X-API-Key"' };

export type AuthFailure = 'missing' | 'unknown_or_revoked';

export function authHook(ring: KeyRing, isLoaded: () => boolean, onFailed?: (reason: AuthFailure) => void) {
  return function authenticate(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
    if (!isLoaded()) {
      return done(new HttpProblem('unavailable', 'The service is starting; retry in a moment.', { 'retry-after': '1' }));
    }
    const header = request.headers[API_KEY_HEADER];
    const principal = ring.authenticate(header);
    if (!principal) {
      const missing = header === undefined || header === '';
      onFailed?.(missing ? 'missing' : 'unknown_or_revoked');
      const detail =
        missing
          ? 'Send your API key in the X-API-Key header.'
          : 'The API key in the X-API-Key header is not valid (unknown or revoked).';
      return done(new HttpProblem('unauthorized', detail, CHALLENGE));
    }
    request.principal = principal;
    done();
  };
}
