/**
 * Drops are read and validated within a byte budget of one maximal document, so memory stays
 * bounded whatever the concurrency: small drops run side by side, large ones one at a time
 * (JSON.parse + ajv, still used for a schema the one-pass check does not support, take several
 * times a drop's size). A drop takes its share once its claim is open and its size known (its
 * fstat), before reading it, and holds it until it is settled.
 */

export interface ByteBudget {
  acquire(bytes: number): Promise<void>;
  release(bytes: number): void;
  readonly used: number;
}

/** A counting semaphore over bytes, first come first served; a request over the limit counts as the limit. */
export function createByteBudget(limit: number): ByteBudget {
  let used = 0;
  const waiting: { bytes: number; go: () => void }[] = [];
  const clamp = (bytes: number) => Math.min(Math.max(0, bytes), limit);
  return {
    get used() {
      return used;
    },
    acquire(bytes) {
      const n = clamp(bytes);
      if (waiting.length === 0 && used + n <= limit) {
        used += n;
        return Promise.resolve();
      }
      return new Promise<void>((go) => waiting.push({ bytes: n, go }));
    },
    release(bytes) {
      used -= clamp(bytes);
      while (waiting.length > 0 && used + waiting[0]!.bytes <= limit) {
        const next = waiting.shift()!;
        used += next.bytes;
        next.go();
      }
    },
  };
}

/**
 * Runs `fn` with a `hold(size)` that takes `size` bytes of the budget (giving back what it held
 * first when re-read at another size: a drop written in place); all is given back when `fn` ends.
 */
export async function withinBudget<T>(budget: ByteBudget, fn: (hold: (size: number) => Promise<void>) => Promise<T>): Promise<T> {
  let held = 0;
  const hold = async (size: number) => {
    if (size === held) return;
    budget.release(held);
    held = 0;
    await budget.acquire(size);
    held = size;
  };
  try {
    return await fn(hold);
  } finally {
    budget.release(held);
  }
}
