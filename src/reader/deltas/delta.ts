/**
 * Delta encoding (RFC 3229) of /v1/data: a client that holds an earlier version sends its ETag in
 * If-None-Match and `A-IM: json-patch` and/or `merge-patch`; when that version is one of the last
 * DELTA_DEPTH and a patch costs less than the whole answer would (in the coding the client takes;
 * a patch far smaller than the file goes without the whole file compressed to compare), the answer
 * is `226 IM Used` with the patch. Otherwise the usual 200 (or 304).
 *
 * Nothing of it runs on the serving loop but lookups: patches and digests are built in a worker
 * pool and kept (facts.ts), each IM on its own. A file recently asked for patches one version
 * behind has its next one built as soon as the reader holds the new version (prebuild.ts), so such
 * a client is answered from what is kept, or waits for that build alone. Other bases are built on
 * the first request, which waits at most `maxWaitMs` for it: then the whole file (the build goes
 * on, and its outcome is kept for the next). Files larger than `maxBytes` are never diffed: their
 * answers are the usual ones.
 *
 * Answers to requests with A-IM carry CANONICAL_DIGEST when it is known within that wait: the
 * SHA-256 of the current version's canonical JSON (RFC 8785), for the client to check what it
 * rebuilt.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Redis } from 'ioredis';
import { createRecentVersions } from '../../catalog/recent-versions.js';
import type { Logger } from '../../log.js';
import { workerScript } from '../../paths.js';
import { redisKeys } from '../../redis/key-names.js';
import type { Store } from '../../store/store.js';
import { withTimeout } from '../../timeout.js';
import type { Answer } from '../data/answer.js';
import type { PublishedCache } from '../data/cache.js';
import { CACHE_CONTROL, dataAnswer, GENERATED_AT, isNotModified } from '../data/data-route.js';
import { createCodingNegotiator } from '../data/encoding.js';
import { createVersionBytes } from '../data/version-bytes.js';
import type { Variant, Version } from '../data/version.js';
import type { Patches } from './build.js';
import { createDeltaFacts, type DeltaFacts } from './facts.js';
import type { Im } from './patches.js';
import { createPool, type Pool } from '../../threads/pool.js';
import { createPrebuild, type PrebuildStats } from './prebuild.js';
import { baseOf, createAImParser } from './request-headers.js';

/** How many versions back a base may be (the catalog keeps ingest.keep_versions of them). */
export const DELTA_DEPTH = 8;
/** The response header with the SHA-256 (hex) of the current version's canonical JSON (RFC 8785). */
export const CANONICAL_DIGEST = 'json-canonical-sha256';
export const DELTA_VARY = 'Accept-Encoding, A-IM, If-None-Match';
/**
 * A patch at most this many times smaller than the file is sent as it is: gzip and brotli at the
 * levels the reader uses do not shrink JSON odds this far, so the whole file's compressed
 * representation need not be made (on the path of a client one version behind) to be compared.
 */
const SURELY_SMALLER = 64;

export type { Im } from './patches.js';
const MEDIA: Record<Im, string> = { 'json-patch': 'application/json-patch+json', 'merge-patch': 'application/merge-patch+json' };
const CODINGS = ['identity', 'gzip', 'br'] as const;

export interface Deltas {
  /**
   * The answer to a GET of `version` that carries A-IM. `variant` makes the whole file's
   * representation for the request's Accept-Encoding: called only when the answer may be the
   * whole file (no patch, or one not small enough to go without comparing).
   */
  answer(version: Version, variant: () => Variant | Promise<Variant>, headers: IncomingHttpHeaders): Promise<Answer>;
  /** What the one-version-behind prebuild did (prebuild.ts). */
  prebuildStats(): PrebuildStats;
  close(): Promise<void>;
}

export interface DeltaDeps {
  readonly published: Pick<PublishedCache, 'onInstall'>;
  readonly facts: DeltaFacts;
  /** The sha256s of a file's newest versions, newest first (src/catalog/recent-versions.ts). */
  readonly shas: (filename: string, n: number) => Promise<string[]>;
  readonly log: Logger;
  /** Files larger than this get no deltas. */
  readonly maxBytes: number;
  /** Longest wait of a request for a build. */
  readonly maxWaitMs: number;
  /** How long after a file's last one-behind request its patches are prebuilt (0: never), and how many at once. */
  readonly prebuild: { readonly forMs: number; readonly maxAtOnce: number };
  readonly close?: () => Promise<void>;
}

/** `p` if it settles within `ms`, else undefined (it goes on; its outcome is kept by whoever made it). */
async function within<T>(p: T | Promise<T>, ms: number): Promise<T | undefined> {
  if (!(p instanceof Promise)) return p;
  try {
    return await withTimeout(p, ms, 'a delta build');
  } catch {
    return undefined;
  }
}

export function createDeltas(deps: DeltaDeps): Deltas {
  const { facts, log, maxBytes, maxWaitMs } = deps;
  const recent = new Map<string, Promise<string[]>>();
  /** The lists of `recent` that have arrived: a request for a file asked before needs no wait (and no timer). */
  const arrived = new WeakMap<Promise<string[]>, string[]>();
  deps.published.onInstall((v) => recent.delete(v.entry.filename));
  const prebuild = createPrebuild({ published: deps.published, facts, maxBytes, ...deps.prebuild });

  /** The newest versions of a file, cached until the reader installs another (only when the list starts with the held one). */
  const shasOf = (version: Version): Promise<string[]> => {
    const name = version.entry.filename;
    let p = recent.get(name);
    if (p === undefined) {
      p = deps.shas(name, DELTA_DEPTH + 1);
      const mine = p;
      recent.set(name, p);
      mine.then(
        (list) => {
          arrived.set(mine, list);
          if (list[0] !== version.entry.sha256 && recent.get(name) === mine) recent.delete(name);
        },
        () => recent.get(name) === mine && recent.delete(name),
      );
    }
    return p;
  };

  const imsOf = createAImParser();

  /** The patches of `ims` from `base` (32 hex digits) to `version`; undefined: none to offer now. */
  const patchesFrom = async (version: Version, base: string, ims: readonly Im[]): Promise<Patches | undefined> => {
    const name = version.entry.filename;
    const held = prebuild.heldBase(version, base, ims);
    let baseSha = held?.entry.sha256;
    if (held !== undefined) prebuild.askedOneBehind(name, ims);
    else {
      const asked = shasOf(version);
      const list = arrived.get(asked) ?? (await withTimeout(asked, maxWaitMs, 'reading recent versions'));
      const at = list.indexOf(version.entry.sha256);
      for (let i = 1; i < list.length && baseSha === undefined; i++) if (list[i]!.startsWith(base)) baseSha = list[i];
      if (baseSha !== undefined && at >= 0 && list[at + 1] === baseSha) prebuild.askedOneBehind(name, ims);
    }
    if (baseSha === undefined) return undefined;
    const pair = facts.pair(version, baseSha, ims, held);
    // Kept (the common case): no timer and no promise of its own.
    return pair instanceof Promise ? within(pair, maxWaitMs) : pair;
  };

  /** `a` with the digest, when it is known or becomes known within the wait. */
  const withDigest = async (a: Answer, version: Version): Promise<Answer> => {
    if (a.status !== 200) return a;
    let d = facts.digestNow(version);
    if (d === undefined)
      d = await within(
        facts.digest(version).catch(() => undefined),
        maxWaitMs,
      );
    if (typeof d === 'string') a.headers.push(CANONICAL_DIGEST, d);
    return a;
  };

  /** The usual answer (200 or 304), with the digest when the file may have deltas. */
  const whole = async (version: Version, variantOf: () => Variant | Promise<Variant>, headers: IncomingHttpHeaders, small: boolean, made?: Variant) => {
    const plain = dataAnswer(version, made ?? (await variantOf()), headers);
    return plain.status === 200 && small ? withDigest(plain, version) : plain;
  };

  const accepted = createCodingNegotiator();

  return {
    close: deps.close ?? (() => Promise.resolve()),
    prebuildStats: () => prebuild.stats(),
    async answer(version, variantOf, headers) {
      const aim = headers['a-im'];
      const ims = imsOf(typeof aim === 'string' ? aim : undefined);
      const small = version.identity.body.length <= maxBytes;
      const inm = headers['if-none-match'];
      const base = small && ims.length > 0 && inm !== undefined ? baseOf(inm, version.entry.sha256) : undefined;
      // Validators are the same in every coding: the identity bytes decide 200 or 304.
      if (base === undefined || isNotModified(version, version.identity, headers)) return whole(version, variantOf, headers, small);
      let found: Awaited<ReturnType<typeof patchesFrom>>;
      try {
        found = await patchesFrom(version, base, ims);
      } catch (err) {
        log.warn({ err: { message: (err as Error).message }, filename: version.entry.filename }, 'cannot make a delta; answering with the whole file');
        return whole(version, variantOf, headers, small);
      }
      const digest = facts.digestNow(version);
      if (found === undefined || typeof digest !== 'string') return whole(version, variantOf, headers, small);
      const accept = accepted(headers['accept-encoding']);
      // The smallest patch of an IM the client takes, in a coding it takes.
      let bestIm: Im | undefined;
      let bestCoding: (typeof CODINGS)[number] = 'identity';
      let bestBody: Buffer | undefined;
      for (let i = 0; i < ims.length; i++) {
        const im = ims[i]!;
        const enc = found[im];
        if (enc === undefined) continue;
        for (let j = 0; j < CODINGS.length; j++) {
          const coding = CODINGS[j]!;
          const body = enc[coding];
          if (coding !== 'identity' && !accept[coding]) continue;
          if (bestBody === undefined || body.length < bestBody.length) {
            bestIm = im;
            bestCoding = coding;
            bestBody = body;
          }
        }
      }
      if (bestIm === undefined || bestBody === undefined) return whole(version, variantOf, headers, small);
      // A patch under 1/SURELY_SMALLER of the file is sent without compressing the whole file to compare.
      if (bestBody.length * SURELY_SMALLER > version.identity.body.length) {
        const variant = await variantOf();
        if (bestBody.length >= variant.body.length) return whole(version, variantOf, headers, small, variant);
      }
      const out = [
        'etag',
        version.identity.etag,
        'last-modified',
        version.lastModified,
        GENERATED_AT,
        version.entry.generatedAt,
        'cache-control',
        CACHE_CONTROL,
        'vary',
        DELTA_VARY,
        'im',
        bestIm,
        'delta-base',
        `"${base}"`,
        'content-type',
        MEDIA[bestIm],
        CANONICAL_DIGEST,
        digest,
      ];
      if (bestCoding !== 'identity') out.push('content-encoding', bestCoding);
      return { status: 226, headers: out, body: bestBody };
    },
  };
}

/** How the deltas of a reader are bounded (config `deltas`). */
export interface DeltaLimits {
  readonly maxBytes: number;
  readonly maxWaitMs: number;
  readonly threads: number;
  /** How long after a file's last one-version-behind request its next patches are built as versions arrive; 0: never. */
  readonly prebuildForMs: number;
}

/**
 * The heap (MB) of a build thread: a build holds both versions parsed, about 10× the bytes of a
 * file at most `maxBytes` long; a build that needs more fails (no patch: the whole file is
 * answered), so no pair of documents can take more of a reader's memory.
 */
export function buildHeapMb(maxBytes: number): number {
  return Math.max(32, Math.ceil((16 * maxBytes) / (1024 * 1024)));
}

/** The deltas of a reader: older versions from `store`, the recent versions listed in Redis, builds in a pool of threads. */
export function createReaderDeltas(deps: {
  store: Pick<Store, 'get'>;
  redis: Pick<Redis, 'lrange'>;
  prefix: string;
  published: Pick<PublishedCache, 'onInstall'>;
  log: Logger;
  limits: DeltaLimits;
}): Deltas {
  const { limits } = deps;
  const recent = createRecentVersions(deps.redis, redisKeys(deps.prefix));
  const pool: Pool = createPool({
    script: workerScript(import.meta.url, './build-worker.js'),
    threads: limits.threads,
    maxQueued: 4 * limits.threads,
    taskTimeoutMs: 30_000,
    // A thread's memory goes back when it ends: soon after its last build, not kept for the next.
    idleMs: 1_000,
    maxHeapMb: buildHeapMb(limits.maxBytes),
  });
  // An older base is read for its build only (the outcome is kept, not the base), uncached: its
  // bytes are handed to the build's thread, and leave the loop's heap with it.
  const bytes = createVersionBytes({ store: deps.store, maxBytes: 0 });
  const facts = createDeltaFacts({ pool, bytes, maxBytes: limits.maxBytes, log: deps.log });
  return createDeltas({
    published: deps.published,
    facts,
    shas: (f, n) => recent.shas(f, n),
    log: deps.log,
    maxBytes: limits.maxBytes,
    maxWaitMs: limits.maxWaitMs,
    // One running and one waiting per thread: the rest of the pool's queue stays free for requests.
    prebuild: { forMs: limits.prebuildForMs, maxAtOnce: 2 * limits.threads },
    close: () => pool.close(),
  });
}
