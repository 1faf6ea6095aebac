/**
 * Redis down or slow: the rate limits fail open. A request that needs Redis (a lease, a failure to
 * count) is served, a warning is logged at most every `warnEveryMs` (default 10 s), and
 * oddsfiles_rate_limit_unavailable_total{scope} counts it. After a failure Redis is left alone for
 * a moment (a hung Redis would otherwise cost every request the command timeout): requests in that
 * moment are served at once, unlimited. Limits resume when Redis answers again.
 */
import { Counter, type Registry } from 'prom-client';
import type { Logger } from '../../log.js';

export type LimitScope = 'key' | 'subscriber' | 'auth_failures';

/** What the limiters report to the metrics. */
export interface LimitMetrics {
  rateLimited(scope: string): void;
  readonly registry?: Registry;
}

export interface FailOpen {
  /** `command()`, or a rejection at once while Redis is left alone after a failure. */
  guard<T>(command: () => Promise<T>): Promise<T>;
  /** A limit not checked because Redis did not answer (`err`: what the guarded command rejected with). */
  failed(scope: LimitScope, err: unknown): void;
}

/** How long Redis is left alone after a failed rate-limit command. */
const BREAK_MS = 1000;
const RESTING = new Error('Redis did not answer a moment ago; checking again shortly');
const UNAVAILABLE_METRIC = 'oddsfiles_rate_limit_unavailable_total';

export function createFailOpen(log: Logger, metrics: LimitMetrics | undefined, warnEveryMs = 10_000): FailOpen {
  const unavailable = unavailableCounter(metrics?.registry);
  let lastWarn = 0;
  let skippedSinceWarn = 0;
  let resumeAt = 0;
  return {
    guard(command) {
      return resumeAt !== 0 && Date.now() < resumeAt ? Promise.reject(RESTING) : command();
    },
    failed(scope, err) {
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
    },
  };
}

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
