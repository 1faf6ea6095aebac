/**
 * The patch from an older base, one the reader does not hold: its bytes are read from the store
 * for that build alone and handed to the build's thread. Bases read both ways the store reads (a
 * small object with synchronous calls, into a slice of Node's buffer pool, which cannot move to a
 * thread and is copied; a large one on the thread pool, into a buffer of its own, which moves) give
 * patches that rebuild the version, build after build on the same thread. A build the pool would
 * refuse reads no base, and no more than two bases are read at once. Real worker threads (built from dist/), a real filesystem store.
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
import { createPool } from '../../../src/reader/deltas/pool.js';
import { createVersionBytes } from '../../../src/reader/data/version-bytes.js';
import { trustedVersion } from '../../../src/reader/data/version.js';
import { createFsStore } from '../../../src/store/fs-store.js';
import { objectKey } from '../../../src/store/store.js';
import { capturingLogger } from '../../helpers/log.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const SYNC_MAX = 64 * 1024;
const FILE = 'site_live_a_b.json';

/** A document of `events` events; event `changed` has another price. */
const docOf = (events: number, changed: number) => ({
  generated_at: '2026-01-01T00:00:00Z',
  events: Array.from({ length: events }, (_, i) => ({ id: i, name: `event ${i}`, odds: [1.5, 2.5 + (i === changed ? 1 : 0), 3.5] })),
});

describe('a patch from an older base read from the store', () => {
  it('rebuilds the version from bases read synchronously and on the thread pool, build after build', async () => {
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
    const facts = createDeltaFacts({ pool, bytes: createVersionBytes({ store, maxBytes: 0 }), maxBytes: 10_000_000, log });

    const put = async (doc: unknown) => {
      const bytes = Buffer.from(JSON.stringify(doc, null, 2));
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      await store.put(objectKey(FILE, sha256), bytes);
      return { bytes, sha256 };
    };
    for (const [events, label] of [
      [100, 'small'],
      [4000, 'large'],
      [100, 'small again'],
    ] as const) {
      const base = await put(docOf(events, 0));
      const target = await put(docOf(events, 1));
      expect(base.bytes.length > SYNC_MAX, label).toBe(events > 1000);
      const now = new Date().toISOString();
      const entry: CatalogEntry = {
        ...{ filename: FILE, bookmaker: 'b', kind: 'live', sport: null, object: objectKey(FILE, target.sha256) },
        ...{ sha256: target.sha256, size: target.bytes.length, generatedAt: now, generatedAtMs: Date.parse(now), publishedAt: now },
      };
      const version = trustedVersion(entry, events, target.bytes);
      const patches = await facts.pair(version, base.sha256, ['json-patch']);
      const patch = patches?.['json-patch'];
      expect(patch, label).toBeDefined();
      const ops = JSON.parse(patch!.identity.toString('utf8')) as jsonpatch.Operation[];
      expect(jsonpatch.applyPatch(docOf(events, 0), ops).newDocument, label).toEqual(docOf(events, 1));
    }
    expect(lines).toEqual([]);
  });

  it('reads no base for a build the pool would refuse: the request gets the whole file, and a later one its patch', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-older-base-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const store = createFsStore(pathToFileURL(dir).href, { syncIoMaxBytes: SYNC_MAX });
    let gets = 0;
    const counted = { get: (k: string) => (gets++, store.get(k)) };
    const pool = createPool({
      script: workerScript(new URL('../../../src/reader/deltas/delta.ts', import.meta.url).href, './build-worker.js'),
      threads: 1,
      maxQueued: 4,
      taskTimeoutMs: 20_000,
    });
    cleanups.push(() => pool.close());
    let full = true;
    const gate = {
      run: pool.run.bind(pool),
      get full() {
        return full;
      },
    };
    const { log } = capturingLogger('warn');
    const facts = createDeltaFacts({ pool: gate, bytes: createVersionBytes({ store: counted, maxBytes: 0 }), maxBytes: 10_000_000, log });
    const put = async (doc: unknown) => {
      const bytes = Buffer.from(JSON.stringify(doc, null, 2));
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      await store.put(objectKey(FILE, sha256), bytes);
      return { bytes, sha256 };
    };
    const base = await put(docOf(100, 0));
    const target = await put(docOf(100, 1));
    const now = new Date().toISOString();
    const entry: CatalogEntry = {
      ...{ filename: FILE, bookmaker: 'b', kind: 'live', sport: null, object: objectKey(FILE, target.sha256) },
      ...{ sha256: target.sha256, size: target.bytes.length, generatedAt: now, generatedAtMs: Date.parse(now), publishedAt: now },
    };
    const version = trustedVersion(entry, 1, target.bytes);
    for (let i = 0; i < 3; i++) expect((await facts.pair(version, base.sha256, ['json-patch']))?.['json-patch']).toBeUndefined();
    expect(gets).toBe(0);
    full = false;
    expect((await facts.pair(version, base.sha256, ['json-patch']))?.['json-patch']).toBeDefined();
    expect(gets).toBe(1);
  });

  it('reads at most two bases at once: a third build is refused while they are under way', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-older-base-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const store = createFsStore(pathToFileURL(dir).href, { syncIoMaxBytes: SYNC_MAX });
    // The store's reads held until released, so that they are under way together.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let gets = 0;
    const held = { get: async (k: string) => (gets++, await released, store.get(k)) };
    const pool = createPool({
      script: workerScript(new URL('../../../src/reader/deltas/delta.ts', import.meta.url).href, './build-worker.js'),
      threads: 1,
      maxQueued: 4,
      taskTimeoutMs: 20_000,
    });
    cleanups.push(() => pool.close());
    const { log } = capturingLogger('warn');
    const facts = createDeltaFacts({ pool, bytes: createVersionBytes({ store: held, maxBytes: 0 }), maxBytes: 10_000_000, log });
    const pairs = await Promise.all(
      ['site_live_a_b.json', 'site_live_c_d.json', 'site_live_e_f.json'].map(async (filename) => {
        const put = async (doc: unknown) => {
          const bytes = Buffer.from(JSON.stringify(doc, null, 2));
          const sha256 = createHash('sha256').update(bytes).digest('hex');
          await store.put(objectKey(filename, sha256), bytes);
          return { bytes, sha256 };
        };
        const base = await put(docOf(100, 0));
        const target = await put(docOf(100, 1));
        const now = new Date().toISOString();
        const entry: CatalogEntry = {
          ...{ filename, bookmaker: 'b', kind: 'live', sport: null, object: objectKey(filename, target.sha256) },
          ...{ sha256: target.sha256, size: target.bytes.length, generatedAt: now, generatedAtMs: Date.parse(now), publishedAt: now },
        };
        return { version: trustedVersion(entry, 1, target.bytes), base: base.sha256 };
      }),
    );
    const asked = pairs.map((p) => facts.pair(p.version, p.base, ['json-patch']));
    await new Promise((r) => setImmediate(r));
    expect(gets).toBe(2);
    release();
    const answers = await Promise.all(asked);
    expect(answers.map((a) => a?.['json-patch'] !== undefined)).toEqual([true, true, false]);
    // Refused, not kept: asked again, it is built.
    expect((await facts.pair(pairs[2]!.version, pairs[2]!.base, ['json-patch']))?.['json-patch']).toBeDefined();
    expect(gets).toBe(3);
  });
});
