/**
 * The delta facts of held versions, built in the worker pool (pool.ts, build-worker.ts) and kept:
 * each version's canonical digest (with the version, for its life), and the patches of each
 * (base, version) pair and IM asked for, in a cache bounded in bytes. Every outcome is kept, "no
 * patch" included (the base is gone, too big, the build failed or timed out), so a patch is built
 * at most once while it is cached. Builds are deduplicated, at most `perFile` at once per filename, and
 * the pool bounds them per reader, as READS_AT_ONCE bounds the older bases read from the store:
 * past a bound a pair is refused (`undefined`) and the request is answered with the whole file,
 * nothing kept.
 */
import { isMarkedAsUntransferable } from 'node:worker_threads';
import { LRUCache } from 'lru-cache';
import type { Logger } from '../../log.js';
import type { VersionBytes } from '../data/version-bytes.js';
import type { Version } from '../data/version.js';
import type { Encoded, Patches } from './build.js';
import type { Im } from './patches.js';
import { PoolBusy, type Pool } from '../../threads/pool.js';

export interface DeltaFacts {
  /** The digest if known: a string, null (the version has no canonical form), undefined (not built yet). */
  digestNow(version: Version): string | null | undefined;
  /** The digest, built if needed. Rejects when the pool refuses or fails. */
  digest(version: Version): Promise<string | null>;
  /**
   * The patches of `ims` from version `baseSha` of the file (`base`: that version, when held in
   * memory) to `version`: at once when kept, a promise while built (one build for the IMs not yet
   * kept or under way), undefined when refused (too many builds). An IM without a patch is missing.
   */
  pair(version: Version, baseSha: string, ims: readonly Im[], base?: Version): Patches | Promise<Patches> | undefined;
}

export interface DeltaFactsDeps {
  readonly pool: Pick<Pool, 'run' | 'full'>;
  readonly bytes: VersionBytes;
  /** Bases larger than this are never diffed. */
  readonly maxBytes: number;
  readonly log: Logger;
  /** Bytes of patches kept (default 32 MiB). */
  readonly cacheBytes?: number;
  /** Pair builds at once per filename (default 2). */
  readonly perFile?: number;
}

interface Reply {
  readonly digest: string | null;
  readonly patches: Record<string, Record<string, Uint8Array>>;
}

/** Older bases read from the store at once, per reader. */
const READS_AT_ONCE = 2;

/** Kept for an IM of a pair that has no patch. */
const NONE = 'none';
const NO_PATCH: Patches = Object.freeze({});

/** `bytes` copied into shared memory: a thread reads them in place. */
function toShared(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(new SharedArrayBuffer(bytes.length));
  out.set(bytes);
  return out;
}
/**
 * `bytes` in an ArrayBuffer that can be moved to a thread: theirs when they fill it and Node lets it
 * go (not one of its pooled or `allocUnsafe` buffers), else a copy. Moved, they are freed with the
 * thread's heap, not left for the loop's next full GC.
 */
function movable(bytes: Uint8Array): Uint8Array {
  const ab = bytes.buffer;
  const own = ab instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === ab.byteLength && !isMarkedAsUntransferable(ab);
  return own ? bytes : new Uint8Array(bytes);
}
const asBuffer = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);
const sizeOf = (e: Encoded | typeof NONE) => 64 + (e === NONE ? 0 : e.identity.length + e.gzip.length + e.br.length);

export function createDeltaFacts(deps: DeltaFactsDeps): DeltaFacts {
  const { pool, log } = deps;
  const perFile = deps.perFile ?? 2;
  const digests = new WeakMap<Version, string | null>();
  const digesting = new WeakMap<Version, Promise<string | null>>();
  /** Per `filename/base/version/im`: the patch, or NONE. */
  const kept = new LRUCache<string, Encoded | typeof NONE>({ maxSize: deps.cacheBytes ?? 32 * 1024 * 1024, sizeCalculation: sizeOf });
  const building = new Map<string, Promise<Encoded | undefined>>();
  const buildsOf = new Map<string, number>();

  /**
   * A held version's bytes (the current one, or the previous as the common base) in shared
   * memory, copied once per version rather than once per build: copying megabytes on each build
   * would hold up the loop.
   */
  const sharedOf = new WeakMap<Version, Uint8Array>();
  const shared = (version: Version): Uint8Array => {
    let s = sharedOf.get(version);
    if (s === undefined) sharedOf.set(version, (s = toShared(version.identity.body)));
    return s;
  };

  /** One task, posted when a thread takes it; a base that is `moved` goes to the thread (see `movable`). */
  const run = (to: Uint8Array, toSha: string, from?: Uint8Array, fromSha?: string, ims?: readonly Im[], moved = false): Promise<Reply> =>
    pool.run<Reply>(() => {
      if (!moved || from === undefined) return { message: { to, toSha, from, fromSha, ims } };
      const own = movable(from);
      return { message: { to, toSha, from: own, fromSha, ims }, transfer: [own.buffer as ArrayBuffer] };
    });

  let reading = 0;
  const readBase = async (name: string, sha: string) => {
    reading++;
    try {
      return await deps.bytes.get(name, sha);
    } finally {
      reading--;
    }
  };

  const build = async (version: Version, baseSha: string, base: Version | undefined, ims: readonly Im[]): Promise<Patches> => {
    const name = version.entry.filename;
    // A base read from the store costs a read and its bytes until the build: none for a build the
    // pool would refuse, and at most READS_AT_ONCE under way (bases waiting in the pool's queue
    // are bounded by it).
    if (base === undefined && (pool.full || reading >= READS_AT_ONCE)) throw new PoolBusy();
    const from = base ? shared(base) : await readBase(name, baseSha);
    if (from === undefined || from.length > deps.maxBytes) return NO_PATCH;
    // An older base (read from the store for this build alone) is moved to the thread.
    const reply = await run(shared(version), version.entry.sha256, from, baseSha, ims, base === undefined);
    digests.set(version, reply.digest);
    const patches: Record<string, Encoded> = {};
    for (const [im, enc] of Object.entries(reply.patches)) {
      patches[im] = { identity: asBuffer(enc.identity!), gzip: asBuffer(enc.gzip!), br: asBuffer(enc.br!) };
    }
    return patches as Patches;
  };

  /** Build the patches of `ims` (none kept or under way); every outcome kept but a refusal. */
  const start = (version: Version, baseSha: string, base: Version | undefined, ims: readonly Im[], keyOf: (im: Im) => string) => {
    const name = version.entry.filename;
    buildsOf.set(name, (buildsOf.get(name) ?? 0) + 1);
    const task = build(version, baseSha, base, ims)
      .then(
        (patches) => {
          for (const im of ims) kept.set(keyOf(im), patches[im] ?? NONE);
          return patches;
        },
        (err: unknown) => {
          // Refused by the pool: nothing kept, and the request gets the whole file.
          if (err instanceof PoolBusy) return NO_PATCH;
          log.warn({ err: { message: (err as Error).message }, filename: name }, 'cannot build a delta; answering with the whole file');
          for (const im of ims) kept.set(keyOf(im), NONE);
          return NO_PATCH;
        },
      )
      .finally(() => {
        for (const im of ims) building.delete(keyOf(im));
        const left = (buildsOf.get(name) ?? 1) - 1;
        if (left > 0) buildsOf.set(name, left);
        else buildsOf.delete(name);
      });
    for (const im of ims)
      building.set(
        keyOf(im),
        task.then((p) => p[im]),
      );
  };

  return {
    digestNow: (version) => digests.get(version),
    digest(version) {
      const known = digests.get(version);
      if (known !== undefined) return Promise.resolve(known);
      let p = digesting.get(version);
      if (p === undefined) {
        p = run(shared(version), version.entry.sha256).then((r) => {
          digests.set(version, r.digest);
          return r.digest;
        });
        digesting.set(version, p);
        void p.catch(() => digesting.delete(version));
      }
      return p;
    },
    pair(version, baseSha, ims, base) {
      const name = version.entry.filename;
      const prefix = `${name}/${baseSha}/${version.entry.sha256}/`;
      // What is kept answers most requests: then no key is made twice and nothing else allocated.
      let kept1: Patches | undefined;
      for (let i = 0; i < ims.length; i++) {
        const im = ims[i]!;
        const k = kept.get(prefix + im);
        if (k === undefined) {
          kept1 = undefined;
          break;
        }
        kept1 ??= {};
        if (k !== NONE) kept1[im] = k;
      }
      if (kept1 !== undefined) return kept1;
      const keyOf = (im: Im) => prefix + im;
      const out: Patches = {};
      const missing: Im[] = [];
      for (const im of ims) {
        const k = kept.get(keyOf(im));
        if (k === NONE) continue;
        if (k !== undefined) out[im] = k;
        else if (!building.has(keyOf(im))) missing.push(im);
      }
      if (missing.length > 0) {
        if ((buildsOf.get(name) ?? 0) < perFile) start(version, baseSha, base, missing, keyOf);
        else if (!ims.some((im) => building.has(keyOf(im)))) return Object.keys(out).length > 0 ? out : undefined;
      }
      const waits = ims.map((im) => building.get(keyOf(im))?.then((e) => e && (out[im] = e)));
      if (waits.every((w) => w === undefined)) return out;
      return Promise.all(waits).then(() => out);
    },
  };
}
