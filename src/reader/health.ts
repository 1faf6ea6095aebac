/**
 * GET /healthz: the process is up. GET /readyz: Redis answers PING, the store answers, and the
 * published set and keys are loaded; a 503 problem naming what is missing otherwise. While Redis
 * is down the reader keeps serving what it holds: only readiness says so.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { HttpProblem } from '../errors.js';
import type { Store } from '../store/store.js';
import { withTimeout } from '../timeout.js';

const OK = Buffer.from('{"status":"ok"}');

export function healthzHandler() {
  return function healthz(_request: FastifyRequest, reply: FastifyReply): FastifyReply {
    return reply.header('cache-control', 'no-store').header('content-type', 'application/json').send(OK);
  };
}

export interface ReadinessDeps {
  readonly redis: Redis;
  readonly store: Store;
  readonly loaded: () => boolean;
  readonly timeoutMs?: number;
}

export function readyzHandler(deps: ReadinessDeps) {
  const timeoutMs = deps.timeoutMs ?? 1000;
  return async function readyz(_request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const [redis, store] = await Promise.allSettled([
      withTimeout(deps.redis.ping(), timeoutMs, 'redis ping'),
      withTimeout(deps.store.ping(), timeoutMs, 'store ping'),
    ]);
    const missing: string[] = [];
    if (redis.status === 'rejected') missing.push('Redis does not answer');
    if (store.status === 'rejected') missing.push('the store does not answer');
    if (!deps.loaded()) missing.push('the published files and keys are not loaded yet');
    if (missing.length > 0) throw new HttpProblem('unavailable', `Not ready: ${missing.join('; ')}.`, { 'retry-after': '1' });
    return reply.header('cache-control', 'no-store').header('content-type', 'application/json').send(OK);
  };
}
