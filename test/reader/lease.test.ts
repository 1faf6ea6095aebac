/**
 * The lease arithmetic of the plan limits (src/reader/limits/lease.ts), with a shared counter kept in
 * this file (the Lua script's arithmetic: INCRBY, a TTL set when the key is new) and a clock of
 * its own. Redis itself is exercised in lease.redis.test.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { blockSize, createTokenLeases, grantedOf, type LeaseFn, type Take } from '../../src/reader/limits/lease.js';

/** A fixed-window counter per key, as the Redis script keeps it, on a clock of the test's. */
function sharedCounter() {
  let clock = 0;
  const keys = new Map<string, { total: number; expiresAt: number }>();
  const calls: { key: string; n: number }[] = [];
  const lease: LeaseFn = async (key, n, windowMs) => {
    calls.push({ key, n });
    let k = keys.get(key);
    if (!k || clock >= k.expiresAt) {
      k = { total: 0, expiresAt: clock + windowMs };
      keys.set(key, k);
    }
    k.total += n;
    return { total: k.total, ttlMs: k.expiresAt - clock };
  };
  return {
    lease,
    calls,
    now: () => clock,
    advance: (ms: number) => (clock += ms),
    total: (key: string) => keys.get(key)?.total ?? 0,
  };
}

const take = (r: Take | Promise<Take>) => Promise.resolve(r);

describe('block size and grant', () => {
  it('takes an eighth of what is left, at least 1, at most 1000', () => {
    expect(blockSize(600, 0)).toBe(75);
    expect(blockSize(600, 520)).toBe(10);
    expect(blockSize(600, 595)).toBe(1);
    expect(blockSize(600, 700)).toBe(1);
    expect(blockSize(5, 0)).toBe(1);
    expect(blockSize(1_000_000, 0)).toBe(1000);
  });

  it('grants only the part of a block that lies under the limit', () => {
    expect(grantedOf(10, 10, 600)).toBe(10);
    expect(grantedOf(605, 10, 600)).toBe(5);
    expect(grantedOf(600, 10, 600)).toBe(10);
    expect(grantedOf(611, 10, 600)).toBe(0);
  });
});

describe('token leases', () => {
  it('allows exactly max per window from one reader, with Remaining counting down', async () => {
    const shared = sharedCounter();
    const leases = createTokenLeases({ lease: shared.lease, now: shared.now });
    const remaining: number[] = [];
    let allowed = 0;
    for (let i = 0; i < 700; i++) {
      const t = await take(leases.take('k', 600, 60_000));
      if (t.allowed) {
        allowed++;
        remaining.push(t.remaining);
      } else expect(t.remaining).toBe(0);
    }
    expect(allowed).toBe(600);
    expect(remaining).toEqual(Array.from({ length: 600 }, (_, i) => 599 - i));
    // Near the end, one token per lease; far fewer leases than requests overall.
    expect(shared.calls.slice(-3).map((c) => c.n)).toEqual([1, 1, 1]);
    expect(shared.calls.length).toBeLessThan(60);
    // A full window is refused without asking again.
    const before = shared.calls.length;
    for (let i = 0; i < 50; i++) expect((await take(leases.take('k', 600, 60_000))).allowed).toBe(false);
    expect(shared.calls.length).toBe(before);
  });

  it('the block shrinks as the window fills', async () => {
    const shared = sharedCounter();
    const leases = createTokenLeases({ lease: shared.lease, now: shared.now });
    for (let i = 0; i < 1000; i++) await take(leases.take('k', 1000, 60_000));
    const sizes = shared.calls.map((c) => c.n);
    expect(sizes[0]).toBe(125);
    for (let i = 1; i < sizes.length; i++) expect(sizes[i]).toBeLessThanOrEqual(sizes[i - 1]!);
    expect(sizes.at(-1)).toBe(1);
    expect(shared.total('k')).toBe(1000);
  });

  it('never allows more than max across readers, whatever the interleaving', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 300 }),
        fc.array(fc.nat({ max: 3 }), { minLength: 1, maxLength: 600 }),
        fc.integer({ min: 1, max: 8 }),
        async (max, order, burst) => {
          const shared = sharedCounter();
          const readers = [0, 1, 2, 3].map(() => createTokenLeases({ lease: shared.lease, now: shared.now }));
          let allowed = 0;
          // Requests arrive in bursts (concurrent within a burst) on the reader `order` names.
          for (let i = 0; i < order.length; i += burst) {
            const batch = order.slice(i, i + burst).map((r) => take(readers[r]!.take('k', max, 60_000)));
            for (const t of await Promise.all(batch)) if (t.allowed) allowed++;
          }
          expect(allowed).toBeLessThanOrEqual(max);
          // Underserving is bounded by what the other readers still hold.
          if (order.length >= max * 2) expect(allowed).toBeGreaterThanOrEqual(max - 3 * Math.max(1, Math.floor(max / 8)));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('two readers alternating on a small limit share it exactly', async () => {
    const shared = sharedCounter();
    const a = createTokenLeases({ lease: shared.lease, now: shared.now });
    const b = createTokenLeases({ lease: shared.lease, now: shared.now });
    const seen: [boolean, number][] = [];
    for (let i = 0; i < 7; i++) {
      const t = await take((i % 2 ? b : a).take('k', 5, 60_000));
      seen.push([t.allowed, t.remaining]);
    }
    expect(seen).toEqual([
      [true, 4],
      [true, 3],
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
      [false, 0],
    ]);
  });

  it('concurrent requests wait for one lease', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const shared = sharedCounter();
    let calls = 0;
    const leases = createTokenLeases({
      lease: async (key, n, w) => {
        calls++;
        await gate;
        return shared.lease(key, n, w);
      },
      now: shared.now,
    });
    const pending = Array.from({ length: 50 }, () => leases.take('k', 600, 60_000));
    expect(pending.every((p) => p instanceof Promise)).toBe(true);
    release();
    const results = await Promise.all(pending.map(take));
    expect(calls).toBe(1);
    expect(results.every((t) => t.allowed)).toBe(true);
    expect(results.map((t) => t.remaining)).toEqual(Array.from({ length: 50 }, (_, i) => 599 - i));
    // The rest of the block is used without waiting.
    expect(leases.take('k', 600, 60_000)).toMatchObject({ allowed: true, remaining: 549 });
  });

  it('starts afresh when the window ends, and Reset counts down on the local clock', async () => {
    const shared = sharedCounter();
    const leases = createTokenLeases({ lease: shared.lease, now: shared.now });
    for (let i = 0; i < 3; i++) expect((await take(leases.take('k', 3, 10_000))).allowed).toBe(true);
    shared.advance(4000);
    const refused = await take(leases.take('k', 3, 10_000));
    expect(refused).toEqual({ allowed: false, remaining: 0, resetMs: 6000 });
    shared.advance(6000);
    const again = await take(leases.take('k', 3, 10_000));
    expect(again).toEqual({ allowed: true, remaining: 2, resetMs: 10_000 });
    expect(shared.total('k')).toBe(1);
  });

  it('drops unused tokens at the end of the window (never carried into the next)', async () => {
    const shared = sharedCounter();
    const leases = createTokenLeases({ lease: shared.lease, now: shared.now });
    expect((await take(leases.take('k', 800, 10_000))).remaining).toBe(799); // a block of 100
    shared.advance(10_000);
    const t = await take(leases.take('k', 800, 10_000));
    expect(t.remaining).toBe(799);
    expect(shared.calls.length).toBe(2);
  });

  it('a failed lease rejects every waiter; the next request tries again', async () => {
    let fail = true;
    const shared = sharedCounter();
    let calls = 0;
    const leases = createTokenLeases({
      lease: async (key, n, w) => {
        calls++;
        await Promise.resolve();
        if (fail) throw new Error('redis away');
        return shared.lease(key, n, w);
      },
      now: shared.now,
    });
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => take(leases.take('k', 10, 1000))));
    expect(results.map((r) => r.status)).toEqual(Array(5).fill('rejected'));
    expect(calls).toBe(1);
    fail = false;
    expect((await take(leases.take('k', 10, 1000))).allowed).toBe(true);
    expect(calls).toBe(2);
  });

  it('keeps at most maxCounters counters', async () => {
    const shared = sharedCounter();
    const leases = createTokenLeases({ lease: shared.lease, now: shared.now, maxCounters: 100 });
    for (let i = 0; i < 1000; i++) await take(leases.take(`k${i}`, 100, 60_000));
    expect(leases.size).toBeLessThanOrEqual(100);
    // Ended windows go first.
    shared.advance(60_000);
    await take(leases.take('fresh', 100, 60_000));
    expect(leases.size).toBeLessThanOrEqual(100);
  });

  it('a counter forgotten under pressure never lets more than max through', async () => {
    const shared = sharedCounter();
    const leases = createTokenLeases({ lease: shared.lease, now: shared.now, maxCounters: 2 });
    let allowed = 0;
    for (let i = 0; i < 300; i++) {
      if ((await take(leases.take('hot', 50, 60_000))).allowed) allowed++;
      await take(leases.take(`cold${i}`, 50, 60_000));
      await take(leases.take(`colder${i}`, 50, 60_000));
    }
    expect(allowed).toBeLessThanOrEqual(50);
    expect(allowed).toBeGreaterThan(0);
  });
});
