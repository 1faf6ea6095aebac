/** The HTTP metrics, fed by the reader's hooks: responses and their time, requests refused for their rate, failed authentications. */
import { Counter, Histogram, type Registry } from 'prom-client';
import { safeLabel } from './metric-label.js';

const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

export interface HttpMetrics {
  /** One HTTP response. `route` is the route pattern (never the raw URL): label cardinality stays bounded. */
  httpResponse(route: string, method: string, status: number, durationMs?: number): void;
  /** A request refused for its rate (scope: e.g. "key", "auth_failures"). */
  rateLimited(scope: string): void;
  /** A failed authentication (reason: e.g. "missing", "unknown", "revoked", "marketplace_secret", "admin_token"). */
  authFailed(reason: string): void;
  /** One answered PUT /v1/data: its outcome (published, unchanged, superseded, rejected, pending, dry_run, refused, failed). */
  httpPublished(outcome: string): void;
}

/** The outcomes of PUT /v1/data, present from 0. */
export const PUBLISH_OUTCOMES = ['published', 'unchanged', 'superseded', 'rejected', 'pending', 'dry_run', 'refused', 'failed'] as const;

export function createHttpMetrics(registry: Registry): HttpMetrics {
  const registers = [registry];
  const httpRequests = new Counter({
    name: 'oddsfiles_http_requests_total',
    help: 'HTTP responses by route pattern, method and status.',
    labelNames: ['route', 'method', 'status'] as const,
    registers,
  });
  const httpDuration = new Histogram({
    name: 'oddsfiles_http_request_duration_seconds',
    help: 'HTTP response time by route pattern and method.',
    labelNames: ['route', 'method'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers,
  });
  const rateLimitedCounter = new Counter({
    name: 'oddsfiles_rate_limited_total',
    help: 'Requests refused with 429, by limit scope.',
    labelNames: ['scope'] as const,
    registers,
  });
  const authFailures = new Counter({
    name: 'oddsfiles_auth_failures_total',
    help: 'Failed authentications (API keys, marketplace secrets, the admin token), by reason.',
    labelNames: ['reason'] as const,
    registers,
  });

  const published = new Counter({
    name: 'oddsfiles_http_publish_total',
    help: 'PUT /v1/data requests by outcome (published, unchanged, superseded, rejected, pending, dry_run, refused, failed).',
    labelNames: ['outcome'] as const,
    registers,
  });
  for (const outcome of PUBLISH_OUTCOMES) published.inc({ outcome }, 0);

  return {
    httpResponse(route, method, status, durationMs) {
      const m = HTTP_METHODS.has(method) ? method : 'OTHER';
      httpRequests.inc({ route, method: m, status: String(status) });
      if (durationMs !== undefined && Number.isFinite(durationMs)) httpDuration.observe({ route, method: m }, Math.max(0, durationMs) / 1000);
    },
    rateLimited(scope) {
      rateLimitedCounter.inc({ scope: safeLabel(scope) });
    },
    authFailed(reason) {
      authFailures.inc({ reason: safeLabel(reason) });
    },
    httpPublished(outcome) {
      published.inc({ outcome: safeLabel(outcome) });
    },
  };
}
