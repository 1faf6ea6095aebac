/**
 * What the deltas threads build (build.ts, through build-worker.ts of the build), in the pool that
 * keeps them off a reader's serving loop: the digest and both patches, only the patches asked
 * for; a version with no canonical form (a number past a double, published before documents had
 * to be I-JSON) has no digest and no patches, and nothing throws; a pair past the thread's heap
 * fails alone.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { workerScript } from '../../../src/paths.js';
import { buildHeapMb } from '../../../src/reader/deltas/delta.js';
import { createPool, type Pool } from '../../../src/threads/pool.js';

const SCRIPT = workerScript(new URL('../../../src/reader/deltas/delta.ts', import.meta.url).href, './build-worker.js');
const pools: Pool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

describe('what the deltas threads build', () => {
  const build = (maxHeapMb?: number) => {
    const p = createPool({ script: SCRIPT, threads: 1, maxQueued: 2, taskTimeoutMs: 10_000, ...(maxHeapMb ? { maxHeapMb } : {}) });
    pools.push(p);
    return p;
  };
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
    const pool = build(buildHeapMb(1024 * 1024));
    const doc = (shift: number) => Array.from({ length: 150_000 }, (_, i) => ({ id: i, odds: [(i + shift) / 7, i / 3], name: `selection ${i}` }));
    await expect(pool.run(() => ({ message: { to: bytes(doc(1)), from: bytes(doc(0)) } }))).rejects.toThrow(/memory/);
    const r = await pool.run<Reply>(() => ({ message: { to: bytes({ a: [1, 2, 3] }), from: bytes({ a: [1, 2] }) } }));
    expect(Object.keys(r.patches).sort()).toEqual(['json-patch', 'merge-patch']);
  });
});
