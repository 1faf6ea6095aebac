/**
 * The plan rate limit: `rate: { max, per }` of the principal's plan, counted per API key
 * (`key:<id>`) or per marketplace subscriber (`subscriber:<marketplace>:<user>`), a fixed window
 * per counter in Redis (`<prefix>:rate:<rateKey>`, TTL the window). Each reader leases tokens of a
 * counter in blocks (lease.ts, one Lua INCRBY per block: lease-script.ts) and decides requests
 * alone while it holds one, so most requests cost no Redis round. Blocks shrink as the window
 * fills: across all readers at most `max` requests are allowed per window, never more. A principal
 * without a rate (a key without a plan, or whose plan has no `rate`) is not limited and gets no
 * RateLimit headers.
 *
 * Redis away: the request is served with the plan's RateLimit-Limit and RateLimit-Policy only
 * (limit-fail-open.ts). Tokens already leased are still used, and a window known to be full still
 * answers 429.
 */
import type { Redis } from 'ioredis';
import type { Rate } from '../../config.js';
import type { Principal } from '../../keys/ring.js';
import { createTokenLeases, type Take } from './lease.js';
import { redisLease } from './lease-script.js';
import type { FailOpen, LimitMetrics } from './limit-fail-open.js';
import { ALLOWED, type RateDecision, type RateLimitCheck } from './rate-limit.js';

export interface PlanLimitDeps {
  readonly redis: Redis;
  /** `<prefix>:rate:`: counters are `<nameSpace><rateKey>`. */
  readonly nameSpace: string;
  readonly failOpen: FailOpen;
  readonly metrics?: LimitMetrics | undefined;
  /** How many plan counters a reader keeps at most (default 100 000). */
  readonly maxCounters?: number | undefined;
}

interface PolicyHeaders {
  readonly name: string;
  readonly limit: string;
  readonly policy: string;
  readonly windowS: number;
  readonly keyDetail: string;
  readonly subscriberDetail: string;
  /** What is sent when the count is unknown (Redis away). */
  readonly degraded: Readonly<Record<string, string>>;
}

export function createPlanLimit(deps: PlanLimitDeps): RateLimitCheck {
  const { metrics, failOpen } = deps;

  const policies = new WeakMap<Principal, PolicyHeaders>();
  const policyOf = (principal: Principal, rate: Rate): PolicyHeaders => {
    let p = policies.get(principal);
    if (!p) {
      const name = principal.plan ?? 'default';
      const windowS = Math.max(1, Math.ceil(rate.perMs / 1000));
      const policy = `"${name}";q=${rate.max};w=${windowS}`;
      p = {
        name,
        limit: String(rate.max),
        policy,
        windowS,
        keyDetail: `Your key allows ${rate.max} requests per ${windowS} s`,
        subscriberDetail: `Your subscription allows ${rate.max} requests per ${windowS} s`,
        degraded: { 'ratelimit-limit': String(rate.max), 'ratelimit-policy': policy },
      };
      policies.set(principal, p);
    }
    return p;
  };

  // Tokens leased from Redis in blocks, requests decided in this process while a token is left
  // (see lease.ts). While Redis rests after a failure, a lease fails at once.
  const leaseInRedis = redisLease(deps.redis, deps.nameSpace);
  const leases = createTokenLeases({
    lease: (key, n, windowMs) => failOpen.guard(() => leaseInRedis(key, n, windowMs)),
    ...(deps.maxCounters !== undefined ? { maxCounters: deps.maxCounters } : {}),
  });

  const decide = (principal: Principal, p: PolicyHeaders, t: Take): RateDecision => {
    const reset = t.resetMs > 0 ? Math.ceil(t.resetMs / 1000) : p.windowS;
    const headers = {
      'ratelimit-limit': p.limit,
      'ratelimit-remaining': String(t.remaining),
      'ratelimit-reset': String(reset),
      'ratelimit-policy': p.policy,
      ratelimit: `"${p.name}";r=${t.remaining};t=${reset}`,
    };
    if (t.allowed) return { allowed: true, headers };
    const subscriber = principal.kind === 'subscriber';
    metrics?.rateLimited(subscriber ? 'subscriber' : 'key');
    return {
      allowed: false,
      headers,
      retryAfterS: reset,
      detail: `${subscriber ? p.subscriberDetail : p.keyDetail}; retry after ${reset} s.`,
    };
  };

  return (principal) => {
    const rate = principal.rate;
    if (rate === undefined) return ALLOWED;
    const p = policyOf(principal, rate);
    const t = leases.take(principal.rateKey, rate.max, rate.perMs);
    if (!(t instanceof Promise)) return decide(principal, p, t);
    return t.then(
      (taken) => decide(principal, p, taken),
      (err: unknown): RateDecision => {
        failOpen.failed(principal.kind === 'subscriber' ? 'subscriber' : 'key', err);
        return { allowed: true, headers: p.degraded };
      },
    );
  };
}
