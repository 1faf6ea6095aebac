/**
 * The patch from an older base, one the reader does not hold: its bytes are read from the store
 * for that build alone and handed to the build's thread. Bases read both ways the store reads (a
 * small object with synchronous calls, into a slice of Node's buffer pool, which cannot move to a
 * thread and is copied; a large one on the thread pool, into a buffer of its own, which moves) give
 * patches that rebuild the version, build after build on the same thread. A build the pool would
 * refuse reads no base, and no more than two bases are read at once. Real worker threads (built
 * from dist/), a real filesystem store.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import jsonpatch from 'fast-json-patch';
import { afterEach, describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../../../src/catalog/types.js';
import { workerScript } from '../../../src/paths.js';
import { createDeltaFacts } from '../../../src/reader/deltas/facts.js';
import { createPool, type Pool } from '../../../src/threads/pool.js';
import { createVersionBytes } from '../../../src/reader/data/version-bytes.js';
import { trustedVersion, type Version } from '../../../src/reader/data/version.js';
import { createFsStore } from '../../../src/store/fs-store.js';
import { objectKey, type Store } from '../../../src/store/store.js';
import { capturingLogger } from '../../helpers/log.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const SYNC_MAX = 64 * 1024;

/** A document of `events` events; event `changed` has another price. */
const docOf = (events: number, changed: number) => ({
  generated_at: '2026-01-01T00:00:00Z',
  events: Array.from({ length: events }, (_, i) => ({ id: i, name: `event ${i}`, odds: [1.5, 2.5 + (i === changed ? 1 : 0), 3.5] })),
});

/**
 * Delta facts over a real pool and an uncached read of a real store, as a reader has them; `read`
 * and `gate` stand between them and the store's reads and the pool (counting, holding, filling).
 */
async function setup(opts: { read?: (store: Store, key: string) => Promise<Buffer>; gate?: (pool: Pool) => Pick<Pool, 'run' | 'full'> } = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-older-base-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const store = createFsStore(pathToFileURL(dir).href, { syncIoMaxBytes: SYNC_MAX });
  const pool = createPool({
    script: workerScript(new URL('../../../src/reader/deltas/delta.ts', import.meta.url).href, './build-worker.js'),
    threads: 1,
    maxQueued: 4,
    taskTimeoutMs: 20_000,
  });
  cleanups.push(() => pool.close());
  const { log, lines } = capturingLogger('warn');
  const read = opts.read;
  const source = read ? { get: (k: string) => read(store, k) } : store;
  const facts = createDeltaFacts({ pool: opts.gate?.(pool) ?? pool, bytes: createVersionBytes({ store: source, maxBytes: 0 }), maxBytes: 10_000_000, log });

  /** Versions A (event 0 changed) and B (event 1 changed) of `filename` in the store: B held, A's sha256 as the base. */
  const pair = async (filename: string, events: number): Promise<{ version: Version; base: string; baseBytes: Buffer }> => {
    const put = async (doc: unknown) => {
      const bytes = Buffer.from(JSON.stringify(doc, null, 2));
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      await store.put(objectKey(filename, sha256), bytes);
      return { bytes, sha256 };
    };
    const a = await put(docOf(events, 0));
    const b = await put(docOf(events, 1));
    const now = new Date().toISOString();
    const entry: CatalogEntry = {
      ...{ filename, bookmaker: 'b', kind: 'live', sport: null, object: objectKey(filename, b.sha256) },
      ...{ sha256: b.sha256, size: b.bytes.length, generatedAt: now, generatedAtMs: Date.parse(now), publishedAt: now },
    };
    return { version: trustedVersion(entry, events, b.bytes), base: a.sha256, baseBytes: a.bytes };
  };
  const patchOf = async (p: { version: Version; base: string }) => (await facts.pair(p.version, p.base, ['json-patch']))?.['json-patch'];
  return { facts, lines, pair, patchOf };
}

describe('a patch from an older base read from the store', () => {
  it('rebuilds the version from bases read synchronously and on the thread pool, build after build', async () => {
    const { lines, pair, patchOf } = await setup();
    for (const [events, label] of [
      [100, 'small'],
      [4000, 'large'],
      [100, 'small again'],
    ] as const) {
      const p = await pair('site_live_a_b.json', events);
      expect(p.baseBytes.length > SYNC_MAX, label).toBe(events > 1000);
      const patch = await patchOf(p);
      expect(patch, label).toBeDefined();
      const ops = JSON.parse(patch!.identity.toString('utf8')) as jsonpatch.Operation[];
      expect(jsonpatch.applyPatch(docOf(events, 0), ops).newDocument, label).toEqual(docOf(events, 1));
    }
    expect(lines).toEqual([]);
  });

  it('reads no base for a build the pool would refuse: the request gets the whole file, and a later one its patch', async () => {
    let gets = 0;
    let full = true;
    const { pair, patchOf } = await setup({
      read: (store, k) => (gets++, store.get(k)),
      gate: (pool) => ({
        run: pool.run.bind(pool),
        get full() {
          return full;
        },
      }),
    });
    const p = await pair('site_live_a_b.json', 100);
    for (let i = 0; i < 3; i++) expect(await patchOf(p)).toBeUndefined();
    expect(gets).toBe(0);
    full = false;
    expect(await patchOf(p)).toBeDefined();
    expect(gets).toBe(1);
  });

  it('reads at most two bases at once: a third build is refused while they are under way', async () => {
    // The store's reads held until released, so that they are under way together.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let gets = 0;
    const { pair, patchOf } = await setup({ read: async (store, k) => (gets++, await released, store.get(k)) });
    const pairs = await Promise.all(['site_live_a_b.json', 'site_live_c_d.json', 'site_live_e_f.json'].map((f) => pair(f, 100)));
    const asked = pairs.map(patchOf);
    await new Promise((r) => setImmediate(r));
    expect(gets).toBe(2);
    release();
    expect((await Promise.all(asked)).map((patch) => patch !== undefined)).toEqual([true, true, false]);
    // Refused, not kept: asked again, it is built.
    expect(await patchOf(pairs[2]!)).toBeDefined();
    expect(gets).toBe(3);
  });
});
