/**
 * What each reader's change endpoints are doing, shared through Redis so that `oddsfiles status`
 * (another process) can show it: every reader writes its figures every few seconds under a key of
 * its own that expires, so a reader that stops drops out by itself.
 */
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/key-names.js';
import type { ChangeMetrics } from './change-metrics.js';

export interface ChangeStats {
  /** Open /v1/stream connections. */
  readonly streams: number;
  /** Change events written to streams since the reader started. */
  readonly events: number;
  /** Stream clients dropped for reading too slowly since the reader started. */
  readonly dropped: number;
  /** Long-polls waiting now. */
  readonly waiting: number;
}

export type ChangeCounters = ChangeMetrics['changes'];

/** Counters for the change endpoints that keep their own totals (for Redis) and feed `metrics` too. */
export function createChangeTally(metrics?: ChangeCounters): ChangeCounters & { readonly stats: () => ChangeStats } {
  let streams = 0;
  let events = 0;
  let dropped = 0;
  let waiting = 0;
  return {
    opened() {
      streams++;
      metrics?.opened();
    },
    closed() {
      streams--;
      metrics?.closed();
    },
    sent(n) {
      events += n;
      metrics?.sent(n);
    },
    droppedSlow() {
      dropped++;
      metrics?.droppedSlow();
    },
    waiting(delta) {
      waiting += delta;
      metrics?.waiting(delta);
    },
    stats: () => ({ streams, events, dropped, waiting }),
  };
}

const EVERY_MS = 5000;

/** Write `stats()` to Redis every few seconds (a key that expires after three misses); returns the stop. */
export function shareChangeStats(redis: Redis, keys: RedisKeys, stats: () => ChangeStats): () => void {
  const key = keys.readerStats(`${hostname()}:${process.pid}`);
  const write = () => void redis.set(key, JSON.stringify(stats()), 'PX', EVERY_MS * 3).catch(() => undefined);
  write();
  const timer = setInterval(write, EVERY_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    void redis.del(key).catch(() => undefined);
  };
}

/** The figures of every reader that wrote them lately, summed, and how many readers that is. */
export async function readChangeStats(redis: Redis, keys: RedisKeys): Promise<ChangeStats & { readonly readers: number }> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', keys.readerStats('*'), 'COUNT', 500);
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0');
  const values = found.length > 0 ? await redis.mget(...found) : [];
  const sum = { streams: 0, events: 0, dropped: 0, waiting: 0, readers: 0 };
  for (const v of values) {
    if (v === null) continue;
    try {
      const s = JSON.parse(v) as ChangeStats;
      sum.streams += s.streams;
      sum.events += s.events;
      sum.dropped += s.dropped;
      sum.waiting += s.waiting;
      sum.readers++;
    } catch {
      // a value of another version: left out
    }
  }
  return sum;
}
