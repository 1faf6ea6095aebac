/**
 * Plan limits counted in each reader, with tokens leased from a shared counter in blocks.
 *
 * A counter is a fixed window kept elsewhere (Redis, see lease-script.ts): `lease(key, n, windowMs)`
 * adds n to it in one atomic step and answers the new total and the time left in the window. A
 * reader that holds a token of a counter decides a request alone; when its tokens are used up it
 * leases a new block of n, and keeps of it only what lies under the limit: the block covers the
 * counter's values (total − n, total], so the tokens granted are those numbered at most `max`.
 * Blocks of different readers never overlap, so across all readers no more than `max` requests are
 * allowed per window, whatever the interleaving.
 *
 * The block shrinks as the window fills, n = clamp(⌊(max − last known total) / divisor⌋, 1,
 * maxBlock), so that the last tokens are leased one at a time and no reader sits on many tokens
 * the others could use: what is served short of `max` is bounded by the leases the other readers
 * still hold. Once a reader knows the total reached `max`, it answers "no" alone until the window
 * ends. Concurrent requests waiting for tokens of one counter wait for one lease.
 *
 * Windows end on the local clock, measured from the moment the lease was sent (so never after the
 * counter's own expiry): then the local tokens are dropped and counting starts afresh. The
 * counters kept are bounded (`maxCounters`). Nothing here knows Redis; tests pass a lease function
 * and a clock of their own.
 */

/** What the shared counter says after a lease: its new total and the time left in its window. */
export interface LeaseGrant {
  readonly total: number;
  /** Milliseconds until the window ends; ≤ 0 when unknown (the window's length is assumed). */
  readonly ttlMs: number;
}

/** Adds n to the counter `key` (a window of windowMs when it starts a new one). */
export type LeaseFn = (key: string, n: number, windowMs: number) => Promise<LeaseGrant>;

/** One request counted. */
export interface Take {
  readonly allowed: boolean;
  /** Requests left in the window as this reader knows it (never negative; 0 when refused). */
  readonly remaining: number;
  /** Milliseconds until the window ends, on the local clock. */
  readonly resetMs: number;
}

export interface TokenLeasesOptions {
  readonly lease: LeaseFn;
  /** A monotonic clock in ms (default performance.now). */
  readonly now?: () => number;
  /** The block is the part of what is left divided by this (default 8). */
  readonly divisor?: number;
  /** The largest block (default 1000). */
  readonly maxBlock?: number;
  /** How many counters are kept at most (default 100 000); past it, ended ones go, then all idle ones. */
  readonly maxCounters?: number;
}

export interface TokenLeases {
  /**
   * Count one request of `key` against `max` per `windowMs`. Synchronous while a local token is
   * left or the window is known to be full; otherwise a promise, which rejects when the lease
   * fails (the caller decides: the reader fails open).
   */
  take(key: string, max: number, windowMs: number): Take | Promise<Take>;
  /** Counters held (for tests and metrics). */
  readonly size: number;
}

interface CounterState {
  /** The counter's total as of the last lease (0 before any). */
  total: number;
  /** The last token granted: min(total, max) at the lease. */
  top: number;
  /** Granted tokens not used yet. */
  tokens: number;
  /** When the window ends, local clock (0: not known yet). */
  endsAt: number;
  /** The lease in flight, if any: requests needing a token wait for it. */
  pending: Promise<void> | undefined;
}

export const LEASE_DEFAULTS = { divisor: 8, maxBlock: 1000, maxCounters: 100_000 } as const;

/** The size of the next block: a share of what is left as last known, at least 1, at most maxBlock. */
export function blockSize(max: number, knownTotal: number, divisor: number = LEASE_DEFAULTS.divisor, maxBlock: number = LEASE_DEFAULTS.maxBlock): number {
  return Math.min(maxBlock, Math.max(1, Math.floor((max - knownTotal) / divisor)));
}

/** How many of a block of n that brought the counter to `total` lie at or under `max`. */
export function grantedOf(total: number, n: number, max: number): number {
  return Math.max(0, Math.min(n, max - (total - n)));
}

export function createTokenLeases(options: TokenLeasesOptions): TokenLeases {
  const { lease } = options;
  const now = options.now ?? (() => performance.now());
  const divisor = options.divisor ?? LEASE_DEFAULTS.divisor;
  const maxBlock = options.maxBlock ?? LEASE_DEFAULTS.maxBlock;
  const maxCounters = options.maxCounters ?? LEASE_DEFAULTS.maxCounters;
  const counters = new Map<string, CounterState>();

  const allowed = (c: CounterState, max: number, at: number): Take => ({
    allowed: true,
    remaining: Math.max(0, max - (c.top - c.tokens)),
    resetMs: Math.max(0, c.endsAt - at),
  });
  const refused = (c: CounterState, at: number): Take => ({ allowed: false, remaining: 0, resetMs: Math.max(0, c.endsAt - at) });

  /** The counter of `key`, with an ended window dropped (unless a lease is in flight). */
  const current = (key: string, at: number): CounterState | undefined => {
    const c = counters.get(key);
    if (c !== undefined && c.pending === undefined && at >= c.endsAt) {
      counters.delete(key);
      return undefined;
    }
    return c;
  };

  const add = (key: string, at: number): CounterState => {
    if (counters.size >= maxCounters) {
      for (const [k, c] of counters) if (c.pending === undefined && at >= c.endsAt) counters.delete(k);
      // Still full: forget every idle counter. Forgetting only ever costs tokens (served short),
      // never lets a request through that the shared counter would refuse.
      if (counters.size >= maxCounters) for (const [k, c] of counters) if (c.pending === undefined) counters.delete(k);
    }
    const c: CounterState = { total: 0, top: 0, tokens: 0, endsAt: 0, pending: undefined };
    counters.set(key, c);
    return c;
  };

  const startLease = (key: string, c: CounterState, max: number, windowMs: number, sentAt: number): Promise<void> => {
    const n = blockSize(max, c.total, divisor, maxBlock);
    const p = lease(key, n, windowMs).then(
      (g) => {
        c.total = g.total;
        c.top = Math.min(g.total, max);
        c.tokens = grantedOf(g.total, n, max);
        // From when the lease was sent: the window never outlives the counter's own.
        c.endsAt = sentAt + (g.ttlMs > 0 ? Math.min(g.ttlMs, windowMs) : windowMs);
        c.pending = undefined;
      },
      (err: unknown) => {
        c.pending = undefined;
        throw err;
      },
    );
    c.pending = p;
    return p;
  };

  const slow = async (key: string, max: number, windowMs: number): Promise<Take> => {
    for (;;) {
      const at = now();
      let c = current(key, at);
      if (c?.pending !== undefined) {
        await c.pending;
        continue;
      }
      if (c !== undefined && c.tokens > 0) {
        c.tokens--;
        return allowed(c, max, at);
      }
      if (c !== undefined && c.total >= max) return refused(c, at);
      c ??= add(key, at);
      await startLease(key, c, max, windowMs, at);
      // Loop: this request takes its token like any other (first, as it waited first).
    }
  };

  return {
    take(key, max, windowMs) {
      const at = now();
      const c = current(key, at);
      if (c !== undefined && c.pending === undefined) {
        if (c.tokens > 0) {
          c.tokens--;
          return allowed(c, max, at);
        }
        if (c.total >= max) return refused(c, at);
      }
      return slow(key, max, windowMs);
    },
    get size() {
      return counters.size;
    },
  };
}
