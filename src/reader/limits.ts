/**
 * Rate limits kept in Redis, so they hold across every reader process. The reader
 * calls the limiters from its own hooks so that the order of checks stays 401 → 429 → 404 → 403,
 * and writes the headers itself.
 *
 * - Plans: `rate: { max, per }` of the principal's plan, counted per API key (`key:<id>`) or per
 *   marketplace subscriber (`subscriber:<marketplace>:<user>`), a fixed window per counter in
 *   Redis (`<prefix>:rate:<rateKey>`, TTL the window). Each reader leases tokens of a counter in
 *   blocks (lease.ts, one Lua INCRBY per block: lease-script.ts) and decides requests alone while
 *   it holds one, so most requests cost no Redis round. Blocks shrink as the window fills: across
 *   all readers at most `max` requests are allowed per window, never more. A principal without a
 *   rate (a key without a plan, or whose plan has no `rate`) is not limited and gets no RateLimit
 *   headers.
 * - Failed authentication, per client address (`request.ip`: trust_proxy decides whether
 *   X-Forwarded-For names it; IPv6 counted per /64), with @fastify/rate-limit's Redis store and
 *   its `createRateLimit` decorator (which counts without adding a hook of its own): over
 *   `reader.auth_failures` every request from that address that presents credentials gets 429
 *   until the window passes, valid key or not, so that a lucky guess cannot be told apart from a
 *   miss. Requests without any credential are not counted (there is nothing to guess), nor are
 *   requests with a valid marketplace secret (a marketplace's proxy speaks for all its subscribers
 *   from a few addresses). Failures are counted in Redis; the reader that sees an address go over
 *   announces the lockout on a channel, and every reader keeps the locked addresses in memory, so
 *   that a request with a valid key costs no Redis round for this check.
 * - Redis down or slow: fail open. A request that needs Redis (a lease, a failure to count) is
 *   served (the plan's RateLimit-Policy still sent), a warning is logged at most every 10 s, and
 *   oddsfiles_rate_limit_unavailable_total{scope} counts it. Tokens already leased are still used,
 *   and a window known to be full still answers 429. Readers keep serving while Redis is away;
 *   limits resume when it is back.
 */
import rateLimitPlugin, { normalizeIP } from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { Counter, type Registry } from 'prom-client';
import type { Rate } from '../config.js';
import type { Principal } from '../keys/ring.js';
import type { Logger } from '../log.js';
import { createTokenLeases, type Take } from './lease.js';
import { redisLease } from './lease-script.js';
import { ALLOWED, type RateDecision, type RateLimitCheck } from './rate-limit.js';

export type LimitScope = 'key' | 'subscriber' | 'auth_failures';

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
  readonly metrics?: { rateLimited(scope: string): void; readonly registry?: Registry } | undefined;
  /** Least time between two "limiter unavailable" warnings (default 10 s). */
  readonly warnEveryMs?: number;
  /** How many plan counters a reader keeps at most (default 100 000). */
  readonly maxCounters?: number;
}

/** The address lockout after failed authentications. */
export interface AuthFailureGate {
  /** True when some address is locked out (as far as this reader knows): then `locked` must be asked. */
  anyLocked(): boolean;
  /** Before serving a request with valid credentials: seconds to wait when its client address is locked out. */
  locked(ip: string | undefined): number | undefined;
  /** Count one failed authentication of a client address; seconds to wait when it is now over its limit. Never rejects. */
  failed(ip: string | undefined): Promise<number | undefined>;
}

export interface ReaderLimits {
  /** The plan limit (the v1 handler asks it after authentication): at once when a token is held here. */
  readonly check: RateLimitCheck;
  readonly authFailures: AuthFailureGate;
}

type Limiter = ReturnType<FastifyInstance['createRateLimit']>;
type LimiterResult = Awaited<ReturnType<Limiter>>;

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

/** How long Redis is left alone after a failed rate-limit command. */
const BREAK_MS = 1000;
const RESTING = new Error('Redis did not answer a moment ago; checking again shortly');
const MAX_LOCAL_LOCKS = 100_000;
const IPV6_SUBNET = 64;
const NO_ROUTE_CONFIG = Object.freeze({ config: Object.freeze({}) });

/** What the rate-limit plugin's limiter reads of a request: the client address, and a route config that names no group. */
function limiterRequest(ip: string | undefined): FastifyRequest {
  return { ip: ip ?? '', routeOptions: NO_ROUTE_CONFIG } as unknown as FastifyRequest;
}

/** Register the limiters on `app` (before its routes) and return them. */
export async function registerReaderLimits(app: FastifyInstance, deps: ReaderLimitsDeps): Promise<ReaderLimits> {
  const { redis, log, metrics } = deps;
  const nameSpace = `${deps.prefix}:rate:`;
  const unavailable = unavailableCounter(metrics?.registry);

  // Each limiter in its own context: the plugin keeps one set of options per registration.
  const limiterIn = async (options: Parameters<typeof rateLimitPlugin>[1]): Promise<Limiter> => {
    let limiter: Limiter | undefined;
    await app.register(async (scope) => {
      await scope.register(rateLimitPlugin, options);
      limiter = scope.createRateLimit();
    });
    return limiter!;
  };
  const failureLimiter = await limiterIn({
    global: false,
    redis,
    nameSpace: `${nameSpace}auth_failures:`,
    skipOnError: false,
    max: deps.authFailures.max,
    timeWindow: deps.authFailures.perMs,
    ipv6Subnet: IPV6_SUBNET,
  });

  // Fail open, and say so: a warning at most every warnEveryMs, a counter always. After a failure
  // Redis is left alone for a moment (a hung Redis would otherwise cost every request the command
  // timeout): requests in that moment are served at once, unlimited.
  const warnEveryMs = deps.warnEveryMs ?? 10_000;
  let lastWarn = 0;
  let skippedSinceWarn = 0;
  let resumeAt = 0;
  const redisResting = () => resumeAt !== 0 && Date.now() < resumeAt;
  const failOpen = (scope: LimitScope, err: unknown) => {
    if (err !== RESTING) resumeAt = Date.now() + BREAK_MS;
    unavailable?.inc({ scope });
    skippedSinceWarn++;
    const now = Date.now();
    if (now - lastWarn >= warnEveryMs) {
      log.warn(
        { scope, skipped: skippedSinceWarn, err: { message: (err as Error | undefined)?.message ?? String(err) } },
        'rate limits cannot be checked (Redis does not answer); serving without them',
      );
      lastWarn = now;
      skippedSinceWarn = 0;
    }
  };

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

  // The plan counters: tokens leased from Redis in blocks, requests decided in this process while
  // a token is left (see lease.ts). While Redis rests after a failure, a lease fails at once.
  const leaseInRedis = redisLease(redis, nameSpace);
  const leases = createTokenLeases({
    lease: (key, n, windowMs) => (redisResting() ? Promise.reject(RESTING) : leaseInRedis(key, n, windowMs)),
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

  const check: RateLimitCheck = (principal) => {
    const rate = principal.rate;
    if (rate === undefined) return ALLOWED;
    const p = policyOf(principal, rate);
    const t = leases.take(principal.rateKey, rate.max, rate.perMs);
    if (!(t instanceof Promise)) return decide(principal, p, t);
    return t.then(
      (taken) => decide(principal, p, taken),
      (err: unknown): RateDecision => {
        failOpen(principal.kind === 'subscriber' ? 'subscriber' : 'key', err);
        return { allowed: true, headers: p.degraded };
      },
    );
  };

  // Locked-out addresses and until when, learnt from this reader's failures and from the others'
  // announcements: a request with a valid key is checked against this map only.
  const lockedUntil = new Map<string, number>();
  const remember = (address: string, seconds: number) => {
    if (lockedUntil.size >= MAX_LOCAL_LOCKS) {
      const now = Date.now();
      for (const [a, until] of lockedUntil) if (until <= now) lockedUntil.delete(a);
      if (lockedUntil.size >= MAX_LOCAL_LOCKS) lockedUntil.clear();
    }
    const until = Date.now() + seconds * 1000;
    if ((lockedUntil.get(address) ?? 0) < until) lockedUntil.set(address, until);
  };
  const knownLock = (address: string): number | undefined => {
    if (lockedUntil.size === 0) return undefined;
    const until = lockedUntil.get(address);
    if (until === undefined) return undefined;
    const left = until - Date.now();
    if (left > 0) return Math.max(1, Math.ceil(left / 1000));
    lockedUntil.delete(address);
    return undefined;
  };

  const channel = `${nameSpace}auth_failures:locks`;
  const announce = (address: string, seconds: number) => {
    redis.publish(channel, JSON.stringify({ a: address, t: seconds })).catch(() => undefined);
  };
  const subscriber = deps.subscriber;
  const channelBytes = Buffer.from(channel);
  // 'messageBuffer': with any 'message' listener, ioredis decodes every message of the connection
  // to a string, the versions carried on the catalog bytes channel included (state.ts).
  const onMessage = (ch: Buffer, message: Buffer) => {
    if (!ch.equals(channelBytes)) return;
    try {
      const { a, t } = JSON.parse(message.toString()) as { a?: unknown; t?: unknown };
      if (typeof a === 'string' && a.length <= 64 && Number.isInteger(t) && (t as number) > 0 && (t as number) <= 86_400) remember(a, t as number);
    } catch {
      // not ours to worry about
    }
  };
  if (subscriber) {
    subscriber.on('messageBuffer', onMessage);
    subscriber
      .subscribe(channel)
      .catch((err: unknown) => log.warn({ err: { message: (err as Error).message } }, 'cannot subscribe to lockout announcements; lockouts stay per reader'));
    app.addHook('onClose', async () => {
      subscriber.off('messageBuffer', onMessage);
      if (subscriber.status === 'ready') await subscriber.unsubscribe(channel).catch(() => undefined);
    });
  }

  const authFailures: AuthFailureGate = {
    anyLocked: () => lockedUntil.size > 0,
    locked(ip) {
      // Nobody locked out (the usual case): no need to normalise the address (an IPv6 regex).
      if (lockedUntil.size === 0) return undefined;
      const known = knownLock(normalizeIP(ip ?? '', IPV6_SUBNET));
      if (known !== undefined) metrics?.rateLimited('auth_failures');
      return known;
    },
    async failed(ip) {
      const address = normalizeIP(ip ?? '', IPV6_SUBNET);
      const known = knownLock(address);
      if (known === undefined) {
        let r: LimiterResult;
        try {
          if (redisResting()) throw RESTING;
          r = await failureLimiter(limiterRequest(ip));
        } catch (err) {
          failOpen('auth_failures', err);
          return undefined;
        }
        if (r.isAllowed || !r.isExceeded) return undefined;
        const t = r.ttlInSeconds > 0 ? r.ttlInSeconds : Math.max(1, Math.ceil(deps.authFailures.perMs / 1000));
        remember(address, t);
        // Every reader learns of it at once (they check valid keys against their own map only).
        announce(address, t);
        metrics?.rateLimited('auth_failures');
        return t;
      }
      metrics?.rateLimited('auth_failures');
      return known;
    },
  };

  return { check, authFailures };
}

const UNAVAILABLE_METRIC = 'oddsfiles_rate_limit_unavailable_total';

function unavailableCounter(registry: Registry | undefined): Counter<'scope'> | undefined {
  if (!registry) return undefined;
  const existing = registry.getSingleMetric(UNAVAILABLE_METRIC);
  if (existing) return existing as Counter<'scope'>;
  return new Counter({
    name: UNAVAILABLE_METRIC,
    help: 'Requests served without a rate-limit check because Redis did not answer in time (fail-open), by limit scope.',
    labelNames: ['scope'] as const,
    registers: [registry],
  });
}
