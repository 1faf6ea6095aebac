/**
 * The one-version-behind prebuild of a reader's deltas (src/reader/deltas/prebuild.ts): a file whose
 * patch from its previous version was asked for recently has its next patch built as soon as the
 * reader holds the new version, and the request one version behind gets that build's outcome
 * (no build of its own); files nobody asked patches of are never prebuilt; `prebuild_for` 0s
 * turns it off. Real worker threads (built from dist/), a real filesystem store for older bases.
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
import { createDeltas, type Deltas } from '../../../src/reader/deltas/delta.js';
import { createPool, type Pool } from '../../../src/threads/pool.js';
import type { PublishedCache } from '../../../src/reader/data/cache.js';
import { createVersionBytes } from '../../../src/reader/data/version-bytes.js';
import { trustedVersion, type Version } from '../../../src/reader/data/version.js';
import { createFsStore } from '../../../src/store/fs-store.js';
import { objectKey } from '../../../src/store/store.js';
import { capturingLogger } from '../../helpers/log.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A reader's deltas over a real pool and store; `install` plays the published cache's part. */
async function setup(prebuildForMs: number) {
  const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-prebuild-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const store = createFsStore(pathToFileURL(dir).href);
  const pool: Pool = createPool({
    script: workerScript(new URL('../../../src/reader/deltas/delta.ts', import.meta.url).href, './build-worker.js'),
    threads: 1,
    maxQueued: 4,
    taskTimeoutMs: 20_000,
  });
  cleanups.push(() => pool.close());
  let builds = 0;
  const counted = {
    run: <T>(make: Parameters<Pool['run']>[0]) => (builds++, pool.run<T>(make)),
    get full() {
      return pool.full;
    },
  };
  const { log } = capturingLogger('error');
  const facts = createDeltaFacts({ pool: counted, bytes: createVersionBytes({ store }), maxBytes: 1_000_000, log });
  const listeners = new Set<(v: Version) => void>();
  const published: Pick<PublishedCache, 'onInstall'> = {
    onInstall: (l) => (listeners.add(l), () => listeners.delete(l)),
  };
  /** Per filename, the sha256s installed, newest first (what the catalog's recent versions list holds). */
  const shas = new Map<string, string[]>();
  const deltas: Deltas = createDeltas({
    published,
    facts,
    shas: (f, n) => Promise.resolve((shas.get(f) ?? []).slice(0, n)),
    log,
    maxBytes: 1_000_000,
    maxWaitMs: 20_000,
    prebuild: { forMs: prebuildForMs, maxAtOnce: 2 },
  });
  let seq = 0;
  const install = async (filename: string, doc: unknown): Promise<Version> => {
    const bytes = Buffer.from(JSON.stringify(doc, null, 2));
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    await store.put(objectKey(filename, sha256), bytes);
    const now = new Date(Date.now() + seq).toISOString();
    const entry: CatalogEntry = {
      filename,
      bookmaker: 'b',
      kind: 'live',
      sport: null,
      object: objectKey(filename, sha256),
      sha256,
      size: bytes.length,
      generatedAt: now,
      generatedAtMs: Date.parse(now),
      publishedAt: now,
    };
    const v = trustedVersion(entry, ++seq, bytes);
    shas.set(filename, [sha256, ...(shas.get(filename) ?? [])]);
    for (const l of listeners) l(v);
    return v;
  };
  /** GET of `v` from `base` with A-IM: json-patch. */
  const ask = (v: Version, base: Version) =>
    deltas.answer(v, () => v.identity, { 'a-im': 'json-patch', 'if-none-match': base.identity.etag, 'accept-encoding': 'identity' });
  return { deltas, install, ask, builds: () => builds };
}

const docOf = (n: number) => ({
  generated_at: `2026-01-01T00:00:${String(n).padStart(2, '0')}Z`,
  events: Array.from({ length: 40 }, (_, i) => ({ id: i, odds: [1.5 + i, 2.5 + (i === n ? n : 0), 3.5] })),
});

/** The patch in a 226 answer applied to `from`: the document it rebuilds. */
const rebuilt = (from: unknown, body: Buffer) =>
  jsonpatch.applyPatch(structuredClone(from), JSON.parse(body.toString('utf8')) as jsonpatch.Operation[]).newDocument;

describe('the one-version-behind prebuild of deltas', () => {
  it('builds the next patch only for files asked one version behind; the request gets that build', async () => {
    const { deltas, install, ask, builds } = await setup(60_000);
    const a1 = await install('a.json', docOf(1));
    const b1 = await install('b.json', docOf(1));
    const a2 = await install('a.json', docOf(2));
    await install('b.json', docOf(2));
    // Nobody asked yet: nothing prebuilt.
    expect(deltas.prebuildStats()).toEqual({ started: 0, skipped: 0, joined: 0 });

    // A client one version behind on a.json (its patch built on request); b.json is fetched whole.
    const first = await ask(a2, a1);
    expect(first.status).toBe(226);
    expect(rebuilt(docOf(1), first.body as Buffer)).toEqual(docOf(2));
    const whole = await deltas.answer(b1, () => b1.identity, {});
    expect(whole.status).toBe(200);

    // The next versions: a.json's patch is built as it arrives, b.json's is not.
    const a3 = await install('a.json', docOf(3));
    await install('b.json', docOf(3));
    expect(deltas.prebuildStats()).toMatchObject({ started: 1, skipped: 0 });
    const before = builds();
    const next = await ask(a3, a2);
    expect(next.status).toBe(226);
    expect(rebuilt(docOf(2), next.body as Buffer)).toEqual(docOf(3));
    // The request joined the prebuild (or found it kept): no build of its own.
    expect(builds()).toBe(before);
    expect(deltas.prebuildStats()).toEqual({ started: 1, skipped: 0, joined: 1 });
  });

  it('prebuilds nothing with prebuild_for 0s: each request builds its own patch', async () => {
    const { deltas, install, ask, builds } = await setup(0);
    const v1 = await install('a.json', docOf(1));
    const v2 = await install('a.json', docOf(2));
    expect((await ask(v2, v1)).status).toBe(226);
    const v3 = await install('a.json', docOf(3));
    const before = builds();
    const next = await ask(v3, v2);
    expect(next.status).toBe(226);
    expect(rebuilt(docOf(2), next.body as Buffer)).toEqual(docOf(3));
    expect(builds()).toBe(before + 1);
    expect(deltas.prebuildStats()).toEqual({ started: 0, skipped: 0, joined: 0 });
  });

  it("makes the whole file's compressed representation only when a patch is not far smaller than the file", async () => {
    const { deltas, install } = await setup(0);
    const bigDoc = (n: number) => ({ ...docOf(n), events: Array.from({ length: 2000 }, (_, i) => ({ id: i, odds: [1.5 + i, 2.5 + (i === n ? n : 0)] })) });
    const v1 = await install('a.json', bigDoc(1));
    const v2 = await install('a.json', bigDoc(2));
    let made = 0;
    const variantOf = (v: Version) => () => (made++, v.identity);
    const headers = (base: Version) => ({ 'a-im': 'json-patch', 'if-none-match': base.identity.etag, 'accept-encoding': 'identity' });
    // A one-price patch of a ~60 KB file: sent without making the whole file's representation.
    const small = await deltas.answer(v2, variantOf(v2), headers(v1));
    expect(small.status).toBe(226);
    expect(made).toBe(0);
    // Every price moved: the patch is not far smaller than the file, so the two are compared.
    const v3 = await install('a.json', { ...bigDoc(3), events: bigDoc(3).events.map((e) => ({ ...e, odds: e.odds.map((o) => o + 0.01) })) });
    const big = await deltas.answer(v3, variantOf(v3), headers(v2));
    expect(made).toBe(1);
    expect(big.status).toBe(200);
    // No patch asked for: the whole file, made once for the answer.
    expect((await deltas.answer(v3, variantOf(v3), {})).status).toBe(200);
    expect(made).toBe(2);
  });
});
