/**
 * The worker pool that keeps delta builds off a reader's serving loop (src/reader/deltas/pool.ts),
 * and what its threads build (build.ts, through build-worker.ts of the build): tasks are answered;
 * one that fails, hangs past its timeout or kills its thread fails alone, and the next is answered
 * by a new thread; past its bound the pool refuses at once. A version with no canonical form (a
 * number past a double, published before documents had to be I-JSON) has no digest and no
 * patches, and nothing throws.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { workerScript } from '../../../src/paths.js';
import { buildHeapMb } from '../../../src/reader/deltas/delta.js';
import { createPool, PoolBusy, type Pool } from '../../../src/reader/deltas/pool.js';

const FIXTURE = new URL('../../fixtures/pool-worker.mjs', import.meta.url);
const pools: Pool[] = [];
const poolOf = (opts: Partial<Parameters<typeof createPool>[0]> = {}) => {
  const p = createPool({ script: FIXTURE, threads: 1, maxQueued: 2, taskTimeoutMs: 10_000, ...opts });
  pools.push(p);
  return p;
};

afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

describe('the deltas worker pool', () => {
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
});

describe('what the deltas threads build', () => {
  const build = () => poolOf({ script: workerScript(new URL('../../../src/reader/deltas/delta.ts', import.meta.url).href, './build-worker.js') });
  const bytes = (v: unknown) => new Uint8Array(Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)));
  type Reply = { digest: string | null; patches: Record<string, Record<string, Uint8Array>> };

  it('the digest of the canonical JSON and both patches, in every coding', async () => {
    const pool = build();
    const r = await pool.run<Reply>(() => ({ message: { to: bytes({ b: 2, a: [1, 2, 3] }), from: bytes({ a: [1, 2], b: 2 }) } }));
    expect(r.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(Object.keys(r.patches).sort()).toEqual(['json-patch', 'merge-patch']);
    expect(JSON.parse(Buffer.from(r.patches['json-patch']!.identity!).toString())).toEqual([{ op: 'add', path: '/a/2', value: 3 }]);
    expect(Object.keys(r.patches['json-patch']!).sort()).toEqual(['br', 'gzip', 'identity']);
  });

  it('only the patches asked for: a JSON Patch client costs no merge patch', async () => {
    const pool = build();
    const message = (ims: string[]) => ({ message: { to: bytes({ b: 2, a: [1, 2, 3] }), from: bytes({ a: [1, 2], b: 2 }), ims } });
    expect(Object.keys((await pool.run<Reply>(() => message(['json-patch']))).patches)).toEqual(['json-patch']);
    expect(Object.keys((await pool.run<Reply>(() => message(['merge-patch']))).patches)).toEqual(['merge-patch']);
    const digestOnly = await pool.run<Reply>(() => message([]));
    expect(digestOnly.patches).toEqual({});
    expect(digestOnly.digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it('a version without a canonical form: no digest, no patches; bytes that are not JSON: a failed task', async () => {
    const pool = build();
    expect(await pool.run<Reply>(() => ({ message: { to: bytes('{"x":1e400}'), from: bytes('{"x":1}') } }))).toEqual({ digest: null, patches: {} });
    await expect(pool.run(() => ({ message: { to: bytes('{"x":') } }))).rejects.toThrow();
    expect((await pool.run<Reply>(() => ({ message: { to: bytes('{"x":1}') } }))).digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it("a pair larger than the thread's heap allows fails alone (the reader answers the whole file); the next is answered", async () => {
    // The heap a reader gives its threads for files up to 1 MiB; these documents are about 9 MB.
    const pool = poolOf({
      script: workerScript(new URL('../../../src/reader/deltas/delta.ts', import.meta.url).href, './build-worker.js'),
      maxHeapMb: buildHeapMb(1024 * 1024),
    });
    const doc = (shift: number) => Array.from({ length: 150_000 }, (_, i) => ({ id: i, odds: [(i + shift) / 7, i / 3], name: `selection ${i}` }));
    await expect(pool.run(() => ({ message: { to: bytes(doc(1)), from: bytes(doc(0)) } }))).rejects.toThrow(/memory/);
    const r = await pool.run<Reply>(() => ({ message: { to: bytes({ a: [1, 2, 3] }), from: bytes({ a: [1, 2] }) } }));
    expect(Object.keys(r.patches).sort()).toEqual(['json-patch', 'merge-patch']);
  });
});
