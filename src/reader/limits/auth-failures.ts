/**
 * The lockout after failed authentications, per client address (`request.ip`: trust_proxy decides
 * whether X-Forwarded-For names it; IPv6 counted per /64), with @fastify/rate-limit's Redis store
 * and its `createRateLimit` decorator (which counts without adding a hook of its own): over
 * `reader.auth_failures` every failed authentication from that address gets 429 instead of 401
 * until the window passes. Only failing attempts are refused: a valid key from a locked-out
 * address is served, so that one client sending a wrong key from behind a NAT or a shared proxy
 * does not lock out its neighbours (keys are 256 random bits: the lockout bounds the cost of bad
 * clients, not the odds of a guess). Requests without any credential are not counted (there is
 * nothing to guess), nor are requests with a valid marketplace secret: the v1 handler decides
 * which requests it asks about.
 *
 * Failures are counted in Redis; the reader that sees an address go over announces the lockout on
 * a channel, and every reader keeps the locked addresses in memory, so that a failed attempt from
 * a locked-out address costs no Redis round. Redis away: the failure is not counted (limit-fail-open.ts).
 */
import rateLimitPlugin, { normalizeIP } from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { Rate } from '../../config.js';
import type { Logger } from '../../log.js';
import type { FailOpen, LimitMetrics } from './limit-fail-open.js';

/** The address lockout after failed authentications. */
export interface AuthFailureGate {
  /** Count one failed authentication of a client address; seconds to wait when it is now over its limit. Never rejects. */
  failed(ip: string | undefined): Promise<number | undefined>;
}

export interface AuthFailureDeps {
  readonly redis: Redis;
  /** A subscriber connection, to hear of lockouts decided by other readers. */
  readonly subscriber?: Redis | undefined;
  /** `<prefix>:rate:`: failures are counted in `<nameSpace>auth_failures:<address>`. */
  readonly nameSpace: string;
  /** config.reader.authFailures. */
  readonly limit: Rate;
  readonly log: Logger;
  readonly failOpen: FailOpen;
  readonly metrics?: LimitMetrics | undefined;
}

type Limiter = ReturnType<FastifyInstance['createRateLimit']>;
type LimiterResult = Awaited<ReturnType<Limiter>>;

const MAX_LOCAL_LOCKS = 100_000;
const IPV6_SUBNET = 64;
const NO_ROUTE_CONFIG = Object.freeze({ config: Object.freeze({}) });

/** What the rate-limit plugin's limiter reads of a request: the client address, and a route config that names no group. */
function limiterRequest(ip: string | undefined): FastifyRequest {
  return { ip: ip ?? '', routeOptions: NO_ROUTE_CONFIG } as unknown as FastifyRequest;
}

/** Register the failure counter on `app` (before its routes), listen for other readers' lockouts, and return the gate. */
export async function registerAuthFailureGate(app: FastifyInstance, deps: AuthFailureDeps): Promise<AuthFailureGate> {
  const { redis, log, metrics, failOpen } = deps;

  // In its own context: the plugin keeps one set of options per registration.
  let failureLimiter: Limiter | undefined;
  await app.register(async (scope) => {
    await scope.register(rateLimitPlugin, {
      global: false,
      redis,
      nameSpace: `${deps.nameSpace}auth_failures:`,
      skipOnError: false,
      max: deps.limit.max,
      timeWindow: deps.limit.perMs,
      ipv6Subnet: IPV6_SUBNET,
    });
    failureLimiter = scope.createRateLimit();
  });
  const countFailure = failureLimiter!;

  // Locked-out addresses and until when, learnt from this reader's failures and from the others'
  // announcements: a failed attempt from one of them is refused without a Redis round.
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

  const channel = `${deps.nameSpace}auth_failures:locks`;
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

  return {
    async failed(ip) {
      const address = normalizeIP(ip ?? '', IPV6_SUBNET);
      const known = knownLock(address);
      if (known === undefined) {
        let r: LimiterResult;
        try {
          r = await failOpen.guard(() => countFailure(limiterRequest(ip)));
        } catch (err) {
          failOpen.failed('auth_failures', err);
          return undefined;
        }
        if (r.isAllowed || !r.isExceeded) return undefined;
        const t = r.ttlInSeconds > 0 ? r.ttlInSeconds : Math.max(1, Math.ceil(deps.limit.perMs / 1000));
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
}
