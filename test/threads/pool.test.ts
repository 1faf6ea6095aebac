/**
 * The pool of worker threads (src/threads/pool.ts) that keeps CPU work off a process's event loop:
 * tasks are answered; one that fails, hangs past its timeout or kills its thread fails alone, and
 * the next is answered by a new thread; past its bound the pool refuses at once; started threads
 * stay when idle if so asked.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createPool, PoolBusy, type Pool } from '../../src/threads/pool.js';

const FIXTURE = new URL('../fixtures/pool-worker.mjs', import.meta.url);
const pools: Pool[] = [];
const poolOf = (opts: Partial<Parameters<typeof createPool>[0]> = {}) => {
  const p = createPool({ script: FIXTURE, threads: 1, maxQueued: 2, taskTimeoutMs: 10_000, ...opts });
  pools.push(p);
  return p;
};

afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

describe('the worker pool', () => {
  it('answers tasks, in order, on its threads', async () => {
    const pool = poolOf({ threads: 2, maxQueued: 10 });
    expect(await Promise.all([1, 2, 3, 4].map((n) => pool.run<number>(() => ({ message: { echo: n } }))))).toEqual([1, 2, 3, 4]);
    expect(pool.pending).toBe(0);
  });

  it('a task that fails, hangs past the timeout or kills its thread fails alone; the next is answered', async () => {
    // The timeout counts from the hand-over, thread start included: long enough for a busy machine.
    const pool = poolOf({ taskTimeoutMs: 3000 });
    expect(await pool.run(() => ({ message: { echo: 'warm' } }))).toBe('warm');
    await expect(pool.run(() => ({ message: { fail: true } }))).rejects.toThrow('failed on purpose');
    await expect(pool.run(() => ({ message: { hang: true } }))).rejects.toThrow(/longer than 3000 ms/);
    expect(await pool.run(() => ({ message: { echo: 'after a hang' } }))).toBe('after a hang');
    await expect(pool.run(() => ({ message: { die: true } }))).rejects.toThrow(/exited/);
    expect(await pool.run(() => ({ message: { echo: 'after a death' } }))).toBe('after a death');
  });

  it('refuses at once past its bound: threads busy and the queue full', async () => {
    const pool = poolOf({ maxQueued: 1, taskTimeoutMs: 3000 });
    const running = pool.run(() => ({ message: { hang: true } }));
    const queued = pool.run(() => ({ message: { echo: 'queued' } }));
    await expect(pool.run(() => ({ message: { echo: 'one too many' } }))).rejects.toBeInstanceOf(PoolBusy);
    await expect(running).rejects.toThrow(/longer than/);
    expect(await queued).toBe('queued');
  });

  it('prestarted threads with no idle limit stay; others end once idle; each gets its workerData', async () => {
    type Who = { threadId: number; workerData: unknown };
    const who = (p: Pool) => p.run<Who>(() => ({ message: { who: true } }));
    const staying = poolOf({ prestart: true, idleMs: Infinity, workerData: { schema: 'x' } });
    const ending = poolOf({ idleMs: 50 });
    const first = [await who(staying), await who(ending)];
    expect(first[0]!.workerData).toEqual({ schema: 'x' });
    await new Promise((r) => setTimeout(r, 400));
    const second = [await who(staying), await who(ending)];
    expect(second[0]!.threadId).toBe(first[0]!.threadId);
    expect(second[1]!.threadId).not.toBe(first[1]!.threadId);
  });
});
