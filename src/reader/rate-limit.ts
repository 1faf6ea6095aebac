/**
 * The place of rate limiting in the order of checks: after authentication (401), before the
 * filename is looked at (404, 403). The check itself is given by the caller: the plan limits kept
 * in Redis (limits.ts) in production, anything in tests; without one every request passes.
 */
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { HttpProblem } from '../errors.js';
import type { Principal } from '../keys/ring.js';

export interface RateDecision {
  readonly allowed: boolean;
  /** Headers for the response either way (RateLimit-Limit, RateLimit-Remaining, ...). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Seconds until a retry may succeed (sent as Retry-After on 429). */
  readonly retryAfterS?: number;
  /** The problem's detail on 429 (a generic one otherwise). */
  readonly detail?: string;
}

/** The decision for a principal without a rate: allowed, no headers. */
export const ALLOWED: RateDecision = Object.freeze({ allowed: true });

/** Counts one request of a principal; resolves whether it may go on. */
export type RateLimitCheck = (principal: Principal, request: FastifyRequest) => RateDecision | Promise<RateDecision>;

/** The preHandler that enforces `check` (a no-op without one). */
export function rateLimitHook(check: RateLimitCheck | undefined) {
  return function rateLimit(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    if (!check) return done();
    const principal = request.principal;
    if (!principal) return done();
    const apply = (d: RateDecision) => {
      if (d.allowed) {
        if (d.headers) reply.headers(d.headers);
        return done();
      }
      const headers: Record<string, string> = { ...d.headers };
      if (d.retryAfterS !== undefined) headers['retry-after'] = String(Math.max(0, Math.ceil(d.retryAfterS)));
      done(new HttpProblem('rate_limited', d.detail ?? 'Too many requests for this key; back off and retry later.', headers));
    };
    try {
      const decision = check(principal, request);
      if (decision instanceof Promise) decision.then(apply, (err: unknown) => done(err as Error));
      else apply(decision);
    } catch (err) {
      done(err as Error);
    }
  };
}
