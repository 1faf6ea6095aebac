/**
 * Rate limits kept in Redis, so they hold across every reader process: the plan rate
 * (plan-limit.ts) and the address lockout after failed authentications (auth-failures.ts), both
 * failing open while Redis does not answer (limit-fail-open.ts). The reader calls the limiters
 * from its own hooks so that the order of checks stays 401 → 429 → 404 → 403, and writes the
 * headers itself.
 */
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Rate } from '../../config.js';
import type { Logger } from '../../log.js';
import { registerAuthFailureGate, type AuthFailureGate } from './auth-failures.js';
import { createFailOpen, type LimitMetrics } from './limit-fail-open.js';
import { createPlanLimit } from './plan-limit.js';
import type { RateLimitCheck } from './rate-limit.js';

export type { AuthFailureGate } from './auth-failures.js';

export interface ReaderLimitsDeps {
  /** Where the counters live: a dedicated connection that fails fast (see startReader). */
  readonly redis: Redis;
  /** A subscriber connection, to hear of lockouts decided by other readers. */
  readonly subscriber?: Redis | undefined;
  /** REDIS_PREFIX: counters are `<prefix>:rate:<rateKey>` and `<prefix>:rate:auth_failures:<address>`. */
  readonly prefix: string;
  /** config.reader.authFailures. */
  readonly authFailures: Rate;
  readonly log: Logger;
  readonly metrics?: LimitMetrics | undefined;
  /** Least time between two "limiter unavailable" warnings (default 10 s). */
  readonly warnEveryMs?: number;
  /** How many plan counters a reader keeps at most (default 100 000). */
  readonly maxCounters?: number;
}

export interface ReaderLimits {
  /** The plan limit (the v1 handler asks it after authentication): at once when a token is held here. */
  readonly check: RateLimitCheck;
  readonly authFailures: AuthFailureGate;
}

/** Register the limiters on `app` (before its routes) and return them. */
export async function registerReaderLimits(app: FastifyInstance, deps: ReaderLimitsDeps): Promise<ReaderLimits> {
  const { redis, log, metrics } = deps;
  const nameSpace = `${deps.prefix}:rate:`;
  // One breaker for both: a Redis that failed one limiter is left alone by the other too.
  const failOpen = createFailOpen(log, metrics, deps.warnEveryMs);
  const authFailures = await registerAuthFailureGate(app, { redis, subscriber: deps.subscriber, nameSpace, limit: deps.authFailures, log, failOpen, metrics });
  const check = createPlanLimit({ redis, nameSpace, failOpen, metrics, maxCounters: deps.maxCounters });
  return { check, authFailures };
}
