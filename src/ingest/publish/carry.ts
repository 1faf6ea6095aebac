/**
 * Which published versions the worker carries to other processes' readers ahead of its commit
 * (src/catalog/carried.ts): those of at most `maxBytes`, within a byte rate, and only while some
 * reader listens.
 *
 * The rate keeps Redis's pub/sub output buffers small: a reader process that stalls receives
 * everything carried meanwhile into its buffer in Redis, and Redis disconnects a subscriber whose
 * buffer passes `client-output-buffer-limit pubsub` (32 MB by default; the reader then reconnects
 * and reads the catalog again). At 16 MB/s a reader can stall for two seconds before that happens.
 * What is not carried, readers read from the store as before.
 *
 * When a carried message reaches no subscriber (every reader runs in the worker's own process and
 * is handed the bytes directly, or no reader runs), carrying pauses for `idleRecheckMs` before one
 * version is carried again to look.
 */
export interface CarryOptions {
  /** Largest version carried; 0 carries nothing. */
  readonly maxBytes: number;
  /** Carried bytes per second, per worker process (a token bucket holding one second's worth). */
  readonly bytesPerSecond: number;
  readonly idleRecheckMs?: number;
  /** Milliseconds clock (tests). */
  readonly now?: () => number;
}

export interface CarryPolicy {
  /** Carry a version of `size` bytes? Takes its bytes from the rate when it says yes. */
  take(size: number): boolean;
  /** How many subscribers got the carried bytes (the reply of their PUBLISH). */
  delivered(receivers: number): void;
}

export const DEFAULT_IDLE_RECHECK_MS = 10_000;

export function createCarryPolicy(options: CarryOptions): CarryPolicy {
  const now = options.now ?? (() => performance.now());
  const idleRecheckMs = options.idleRecheckMs ?? DEFAULT_IDLE_RECHECK_MS;
  const capacity = options.bytesPerSecond;
  let tokens = capacity;
  let filledAt = now();
  let idleUntil = -Infinity;
  return {
    take(size) {
      if (size <= 0 || size > options.maxBytes || size > capacity) return false;
      const t = now();
      if (t < idleUntil) return false;
      tokens = Math.min(capacity, tokens + ((t - filledAt) / 1000) * options.bytesPerSecond);
      filledAt = t;
      if (tokens < size) return false;
      tokens -= size;
      return true;
    },
    delivered(receivers) {
      idleUntil = receivers > 0 ? -Infinity : now() + idleRecheckMs;
    },
  };
}
