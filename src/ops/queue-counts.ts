/**
 * Queue depth and connected workers read with plain ioredis: what BullMQ's Queue.getJobCounts and
 * getWorkersCount answer, without loading BullMQ (megabytes of RSS) into processes that only
 * report on the queue: a reader-only process's /metrics, `oddsfiles status`.
 *
 * The layout read here is BullMQ 5's: `<prefix>:<queue>:wait|paused|active` are lists, every other
 * state a sorted set; workers name their connections `<prefix>:<base64 queue>` or
 * `<prefix>:<base64 queue>:w:<name>`. test/ops/queue-counts.test.ts checks both answers against
 * BullMQ's own for every state, so a BullMQ upgrade that moves them fails there.
 */
import type { Redis } from 'ioredis';
import { INGEST_QUEUE } from '../redis/key-names.js';
import type { QueueSource } from './metrics.js';

/** The states BullMQ keeps in lists; all others are sorted sets. */
const LIST_STATES = new Set(['wait', 'paused', 'active']);

export function createQueueCounts(redis: Redis, prefix: string, name: string = INGEST_QUEUE): Required<QueueSource> {
  const base = `${prefix}:${name}:`;
  const clientName = `${prefix}:${Buffer.from(name).toString('base64')}`;
  return {
    name,
    async getJobCounts(...types: string[]): Promise<Record<string, number>> {
      // As BullMQ: asking for "waiting" also answers "paused".
      const states = [...new Set(types.includes('waiting') ? [...types, 'paused'] : types)];
      const pipeline = redis.pipeline();
      for (const state of states) {
        const stored = state === 'waiting' ? 'wait' : state;
        if (LIST_STATES.has(stored)) pipeline.llen(base + stored);
        else pipeline.zcard(base + stored);
      }
      const replies = (await pipeline.exec()) ?? [];
      const counts: Record<string, number> = {};
      states.forEach((state, i) => {
        const [err, n] = replies[i] ?? [new Error('no reply'), 0];
        if (err) throw err;
        counts[state] = Number(n) || 0;
      });
      return counts;
    },
    async getWorkersCount(): Promise<number> {
      const list = (await redis.client('LIST')) as string;
      let n = 0;
      for (const line of list.split(/\r?\n/)) {
        const m = / name=(\S*)/.exec(line);
        const connName = m?.[1];
        if (connName && (connName === clientName || connName.startsWith(`${clientName}:w:`))) n++;
      }
      return n;
    },
  };
}
