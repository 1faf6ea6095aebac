/** Wires the history endpoints into the reader app (routes.ts). */
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { createHistoryIndex } from '../../catalog/history-index.js';
import type { Logger } from '../../log.js';
import { redisKeys } from '../../redis/key-names.js';
import type { Store } from '../../store/store.js';
import type { V1Handler } from '../data/v1-handler.js';
import { createVersionBytes } from '../data/version-bytes.js';
import { boundedHistoryIndex } from '../redis-reads.js';
import { createHistoryBytes } from './bytes.js';
import { registerHistoryRoutes } from './routes.js';

export interface HistoryDeps {
  readonly v1: V1Handler;
  readonly redis: Redis;
  readonly prefix: string;
  readonly store: Store;
  readonly log: Logger;
}

export function registerHistory(app: FastifyInstance, deps: HistoryDeps): void {
  registerHistoryRoutes(app, {
    v1: deps.v1,
    // Its reads bounded: while Redis is away, a 503 within a few seconds (redis-reads.ts).
    index: boundedHistoryIndex(createHistoryIndex(deps.redis, redisKeys(deps.prefix))),
    bytes: createHistoryBytes({ log: deps.log }),
    versionBytes: createVersionBytes({ store: deps.store }),
  });
}
