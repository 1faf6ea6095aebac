/**
 * The plan rate as the v1 handler sees it: a check that counts one request of a principal and
 * decides whether it may go on, after authentication (401) and before the filename is looked at
 * (404, 403). The plan limits kept in Redis (plan-limit.ts) in production, anything in tests.
 */
import type { Principal } from '../../keys/ring.js';

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

/** Counts one request of a principal: at once when it can (a token held here), else after asking Redis. */
export type RateLimitCheck = (principal: Principal) => RateDecision | Promise<RateDecision>;
