/**
 * The reader's edge: the listener's timeouts and bounds, and when the process counts as
 * overloaded and sheds load with 503 + Retry-After (@fastify/under-pressure; /healthz and
 * /metrics are exempt).
 */
import { getHeapStatistics } from 'node:v8';
import underPressure from '@fastify/under-pressure';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HttpProblem } from '../../errors.js';
import type { Logger } from '../../log.js';

/** When the process counts as overloaded (@fastify/under-pressure); 0 turns a check off. */
export interface PressureLimits {
  /** Mean event-loop delay over a sample, ms (default 1000). */
  readonly maxEventLoopDelayMs?: number;
  /** V8 heap in use, bytes (default 90 % of the heap limit). Published bytes live outside the heap. */
  readonly maxHeapUsedBytes?: number;
  /** How often the figures are sampled, ms (default 1000). */
  readonly sampleIntervalMs?: number;
  /** Retry-After of the 503, seconds (default 5). */
  readonly retryAfterS?: number;
}

/** Timeouts and bounds of the listener (defaults in EDGE_DEFAULTS). */
export interface EdgeLimits {
  readonly connectionTimeoutMs?: number;
  readonly keepAliveTimeoutMs?: number;
  readonly headersTimeoutMs?: number;
  readonly requestTimeoutMs?: number;
  readonly maxRequestsPerSocket?: number;
  readonly maxHeaderBytes?: number;
}

export const EDGE_DEFAULTS = {
  /** An idle socket (no request in flight, nothing sent) is closed after this. */
  connectionTimeoutMs: 120_000,
  /** Longer than the 60 s idle timeout of most load balancers, so that they close first. */
  keepAliveTimeoutMs: 72_000,
  /** The whole header block must arrive within this (slow-loris). */
  headersTimeoutMs: 10_000,
  /** The whole request must arrive within this. */
  requestTimeoutMs: 30_000,
  /** Then the connection is closed after its response, so load spreads over readers again. */
  maxRequestsPerSocket: 10_000,
  /** Request line plus headers; over it: 431 (or 414 when the request line alone is the cause). */
  maxHeaderBytes: 16 * 1024,
  /** HTTP/2 session idle timeout. */
  http2SessionTimeoutMs: 72_000,
} as const;

/** Paths never refused for load: the liveness probe and the metrics that explain the load. */
const PRESSURE_EXEMPT = new Set(['/healthz', '/metrics']);

/** 503 + Retry-After (problem+json) while the process is overloaded, except on exempt paths. */
export async function registerPressure(app: FastifyInstance, limits: PressureLimits = {}, log: Logger): Promise<void> {
  const retryAfterS = limits.retryAfterS ?? 5;
  // One problem for every refusal: shedding load must cost next to nothing.
  const overloaded = new HttpProblem('unavailable', `The service is overloaded; retry after ${retryAfterS} s.`, { 'retry-after': String(retryAfterS) });
  let lastWarn = 0;
  await app.register(underPressure, {
    maxEventLoopDelay: limits.maxEventLoopDelayMs ?? 1000,
    maxHeapUsedBytes: limits.maxHeapUsedBytes ?? Math.floor(getHeapStatistics().heap_size_limit * 0.9),
    sampleInterval: limits.sampleIntervalMs ?? 1000,
    retryAfter: retryAfterS,
    pressureHandler: (request: FastifyRequest, _reply: FastifyReply, type: string, value: number | undefined) => {
      if (PRESSURE_EXEMPT.has(request.routeOptions.url ?? '')) return undefined;
      const now = Date.now();
      if (now - lastWarn > 10_000) {
        lastWarn = now;
        log.warn({ type, value }, 'overloaded: answering 503 until the load drops');
      }
      return Promise.reject(overloaded);
    },
  });
}
