/**
 * A key's open streams counted across every reader of the deployment, so that a plan's `streams`
 * holds however many readers a load balancer spreads a client over. Each open stream holds a slot:
 * a member of the key's sorted set in Redis, scored by when it lapses on Redis's clock. A reader
 * renews its slots well before they lapse and removes them when their streams end; the slots of a
 * reader that died without closing lapse after `leaseMs`.
 *
 * Redis not answering: the stream is let through (as the plan rate is), and the reader's own count
 * of the key's streams still bounds it on this reader; its slot is taken at the next renewal.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../../redis/key-names.js';
import { withTimeout } from '../../timeout.js';

export interface StreamSlots {
  /** Take a slot of `rateKey` if fewer than `limit` are held on all readers: its id, or `full` (Redis not answering: a slot, taken at the next renewal). */
  take(rateKey: string, limit: number): Promise<{ slot: string } | 'full'>;
  /** Give a slot back (its stream ended). */
  release(rateKey: string, slot: string): void;
  /** Slots held by this reader now. */
  readonly held: number;
  close(): void;
}

export interface StreamSlotsDeps {
  readonly redis: Redis;
  readonly keys: RedisKeys;
  readonly leaseMs: number;
  /** How long a take may wait for Redis before the stream is let through. */
  readonly timeoutMs?: number;
  readonly onError?: (err: Error) => void;
}

// KEYS[1] the key's slots; ARGV: lease ms, limit, member. 1 taken, 0 full.
const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1`;

// KEYS[1] the key's slots; ARGV: lease ms, members... (added again if they lapsed meanwhile).
const RENEW = `
local t = redis.call('TIME')
local until_ = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], until_, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 0`;

export function createStreamSlots(deps: StreamSlotsDeps): StreamSlots {
  const { redis, keys, leaseMs } = deps;
  const timeoutMs = deps.timeoutMs ?? 1000;
  const reader = randomBytes(6).toString('hex');
  let next = 0;
  /** rateKey → the slots this reader holds. */
  const mine = new Map<string, Set<string>>();
  let held = 0;
  const fail = (err: unknown) => deps.onError?.(err as Error);

  const hold = (rateKey: string, slot: string) => {
    let set = mine.get(rateKey);
    if (!set) mine.set(rateKey, (set = new Set()));
    set.add(slot);
    held++;
  };

  const renew = () => {
    if (mine.size === 0) return;
    const batch = redis.pipeline();
    for (const [rateKey, slots] of mine) batch.eval(RENEW, 1, keys.streamSlots(rateKey), leaseMs, ...slots);
    batch.exec().catch(fail);
  };
  const timer = setInterval(renew, Math.max(100, Math.floor(leaseMs / 3)));
  timer.unref();

  return {
    async take(rateKey, limit) {
      const slot = `${reader}:${(next++).toString(36)}`;
      try {
        const taken = await withTimeout(redis.eval(TAKE, 1, keys.streamSlots(rateKey), leaseMs, limit, slot), timeoutMs, 'stream slot');
        if (taken === 0) return 'full';
      } catch (err) {
        fail(err);
      }
      hold(rateKey, slot);
      return { slot };
    },
    release(rateKey, slot) {
      const set = mine.get(rateKey);
      if (!set?.delete(slot)) return;
      held--;
      if (set.size === 0) mine.delete(rateKey);
      redis.zrem(keys.streamSlots(rateKey), slot).catch(fail);
    },
    get held() {
      return held;
    },
    close() {
      clearInterval(timer);
      const batch = redis.pipeline();
      for (const [rateKey, slots] of mine) batch.zrem(keys.streamSlots(rateKey), ...slots);
      mine.clear();
      held = 0;
      batch.exec().catch(fail);
    },
  };
}
