/**
 * Which versions the worker carries with its commit (src/ingest/publish/carry.ts): at most maxBytes each,
 * within the byte rate (a bucket of one second's worth, refilled continuously), and, once a
 * carried message reached nobody, none until the idle recheck. A pure policy on a test clock.
 */
import { describe, expect, it } from 'vitest';
import { createCarryPolicy } from '../../src/ingest/publish/carry.js';

const KB = 1024;

describe('the carry policy', () => {
  it('carries versions up to maxBytes and nothing larger or empty', () => {
    const p = createCarryPolicy({ maxBytes: 256 * KB, bytesPerSecond: 16 * 1024 * KB, now: () => 0 });
    expect(p.take(256 * KB)).toBe(true);
    expect(p.take(256 * KB + 1)).toBe(false);
    expect(p.take(0)).toBe(false);
  });

  it('keeps to the byte rate: a second of burst, then what the rate refills', () => {
    let t = 0;
    const p = createCarryPolicy({ maxBytes: 200 * KB, bytesPerSecond: 1000 * KB, now: () => t });
    let carried = 0;
    while (p.take(200 * KB)) carried++;
    expect(carried).toBe(5);
    t += 100; // 100 KB refilled: not enough for 200 KB
    expect(p.take(200 * KB)).toBe(false);
    expect(p.take(100 * KB)).toBe(true);
    t += 200;
    expect(p.take(200 * KB)).toBe(true);
    expect(p.take(1)).toBe(false);
    // A long quiet spell refills one second's worth, never more.
    t += 60_000;
    carried = 0;
    while (p.take(200 * KB)) carried++;
    expect(carried).toBe(5);
  });

  it('stops carrying for idleRecheckMs once a carried version reached nobody, then looks again', () => {
    let t = 0;
    const p = createCarryPolicy({ maxBytes: 256 * KB, bytesPerSecond: 16 * 1024 * KB, idleRecheckMs: 10_000, now: () => t });
    expect(p.take(KB)).toBe(true);
    p.delivered(0);
    t += 9_999;
    expect(p.take(KB)).toBe(false);
    t += 1;
    expect(p.take(KB)).toBe(true);
    p.delivered(2);
    expect(p.take(KB)).toBe(true);
  });

  it('never carries a version larger than one second of its rate', () => {
    const p = createCarryPolicy({ maxBytes: 256 * KB, bytesPerSecond: 100 * KB, now: () => 0 });
    expect(p.take(101 * KB)).toBe(false);
    expect(p.take(100 * KB)).toBe(true);
  });
});
