/**
 * The bound on a request's Redis reads (src/reader/redis-reads.ts), without Redis: a read that
 * answers passes through; one that fails (Redis stopped: the command connection refuses at once)
 * is a 503 at once; one with no answer (Redis paused) is a 503 at the bound, and its late answer
 * or failure is dropped. The change log's blocking tail read and the history index's worker-side
 * methods are not bounded.
 */
import { describe, expect, it } from 'vitest';
import type { ChangeLog, LoggedChange } from '../../src/catalog/change-log.js';
import type { HistoryIndex } from '../../src/catalog/history-index.js';
import { HttpProblem } from '../../src/errors.js';
import { boundedChangeLog, boundedHistoryIndex, boundedRead, REDIS_READ_BOUND_MS } from '../../src/reader/redis-reads.js';

const never = <T>() => new Promise<T>(() => undefined);
const after = <T>(ms: number, value: T) => new Promise<T>((r) => setTimeout(() => r(value), ms));

async function problemOf(p: Promise<unknown>): Promise<HttpProblem> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HttpProblem);
  return err as HttpProblem;
}

describe('boundedRead', () => {
  it('is a few seconds by default', () => {
    expect(REDIS_READ_BOUND_MS).toBe(3000);
  });

  it('passes an answer through', async () => {
    expect(await boundedRead(after(5, 42), 'the change log', 200)).toBe(42);
  });

  it('turns a failure into a 503 with Retry-After at once', async () => {
    const t0 = performance.now();
    const p = await problemOf(boundedRead(Promise.reject(new Error("Stream isn't writeable and enableOfflineQueue options is false")), 'the change log', 5000));
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(p.status).toBe(503);
    expect(p.code).toBe('http.unavailable');
    expect(p.headers['retry-after']).toBe('5');
    expect(p.detail).toMatch(/Redis, which keeps the change log, cannot be reached/);
    // The cause stays in the logs, not in the answer.
    expect(p.detail).not.toMatch(/enableOfflineQueue/);
  });

  it('answers 503 for a Redis that is there but cannot serve yet (loading its data, no primary)', async () => {
    const loading = Object.assign(new Error('LOADING Redis is loading the dataset in memory'), { name: 'ReplyError' });
    expect((await problemOf(boundedRead(Promise.reject(loading), 'the change log', 5000))).status).toBe(503);
  });

  it('lets other failures through as they are: a bug or a wrong answer is a 500, and logged', async () => {
    const wrongType = Object.assign(new Error('WRONGTYPE Operation against a key holding the wrong kind of value'), { name: 'ReplyError' });
    await expect(boundedRead(Promise.reject(wrongType), 'the change log', 5000)).rejects.toBe(wrongType);
    const bug = new TypeError("Cannot read properties of undefined (reading 'seq')");
    await expect(boundedRead(Promise.reject(bug), 'the change log', 5000)).rejects.toBe(bug);
  });

  it('answers 503 at the bound when Redis says nothing, and drops what comes later', async () => {
    let fail!: (err: Error) => void;
    const late = new Promise<number>((_, reject) => (fail = reject));
    const t0 = performance.now();
    const p = await problemOf(boundedRead(late, 'the history of the files', 100));
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(95);
    expect(took).toBeLessThan(2000);
    expect(p.status).toBe(503);
    expect(p.detail).toMatch(/did not answer within 0.1 s/);
    // No unhandled rejection (vitest fails the run on one).
    fail(new Error('Connection is closed.'));
    await after(10, undefined);
  });
});

describe('boundedChangeLog', () => {
  const change: LoggedChange = {
    seq: 1,
    entry: { filename: 'a.json', sha256: 'x', size: 1, generatedAt: '', generatedAtMs: 0, publishedAt: '' },
    previousSha256: null,
  };

  it('bounds range and bounds; leaves the tail read (XREAD BLOCK) as it is', async () => {
    const log: ChangeLog = { range: () => never(), bounds: () => never(), read: () => after(150, [change]) };
    const bounded = boundedChangeLog(log, 50);
    expect((await problemOf(bounded.range(0, 10))).status).toBe(503);
    expect((await problemOf(bounded.bounds())).status).toBe(503);
    // A blocking read waits longer than the bound by design.
    expect(await bounded.read(0, 10, 1000)).toEqual([change]);
  });

  it('passes answers through', async () => {
    const log: ChangeLog = { range: async () => [change], bounds: async () => ({ first: 1, last: 1 }), read: async () => [] };
    const bounded = boundedChangeLog(log, 50);
    expect(await bounded.range(0, 10)).toEqual([change]);
    expect(await bounded.bounds()).toEqual({ first: 1, last: 1 });
  });
});

describe('boundedHistoryIndex', () => {
  it("bounds GET /v1/history's reads; the worker's methods are the index's own", async () => {
    const unbuilt = async () => ['a.json'];
    const index = {
      page: () => never(),
      at: () => Promise.reject(new Error('connect ECONNREFUSED')),
      next: () => never(),
      byEtag: async () => undefined,
      unbuilt,
      rebuild: () => never(),
      inUse: () => never(),
    } as unknown as HistoryIndex;
    const bounded = boundedHistoryIndex(index, 50);
    expect((await problemOf(bounded.page('a.json', { limit: 1 }))).status).toBe(503);
    expect((await problemOf(bounded.at('a.json', 0))).detail).toMatch(/cannot be reached/);
    expect((await problemOf(bounded.next('a.json', {} as never))).status).toBe(503);
    expect(await bounded.byEtag('a.json', 'ab')).toBeUndefined();
    expect(bounded.unbuilt).toBe(unbuilt);
    expect(bounded.rebuild).toBe(index.rebuild);
  });
});
