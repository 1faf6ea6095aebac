/**
 * Delta encoding (RFC 3229) of /v1/data: a client that holds an earlier version sends its ETag in
 * If-None-Match and `A-IM: json-patch` and/or `merge-patch`; when that version is one of the last
 * DELTA_DEPTH and a patch costs less than the whole answer would (in the coding the client takes),
 * the answer is `226 IM Used` with the patch. Otherwise the usual 200 (or 304).
 *
 * A patch is made once per (base, current) pair, on the first request that asks for it, never
 * when publishing: the base's bytes come from the store (version-bytes.ts), both patches are made,
 * checked by applying them (a patch that does not give the current version back as a JSON value
 * is never offered), compressed, and kept in a cache bounded in bytes.
 *
 * Answers to requests with A-IM carry CANONICAL_DIGEST: the SHA-256 of the current version's
 * canonical JSON (RFC 8785), for the client to check what it rebuilt.
 */
import type { IncomingHttpHeaders } from 'node:http';
import canonicalize from 'canonicalize';
import { LRUCache } from 'lru-cache';
import type { Redis } from 'ioredis';
import { createRecentVersions } from '../../catalog/recent-versions.js';
import type { Logger } from '../../log.js';
import { redisKeys } from '../../redis/key-names.js';
import type { Store } from '../../store/store.js';
import { withTimeout } from '../../timeout.js';
import type { Answer } from '../data/answer.js';
import type { PublishedCache } from '../data/cache.js';
import { CACHE_CONTROL, dataAnswer, GENERATED_AT } from '../data/data-route.js';
import { compress, parseAcceptEncoding } from '../data/encoding.js';
import type { Json } from './merge-patch.js';
import { makePatches, type Im } from './patches.js';
import { createVersionBytes, type VersionBytes } from '../data/version-bytes.js';
import type { Variant, Version } from '../data/version.js';
import { sha256Hex } from '../../sha256.js';

/** How many versions back a base may be (the catalog keeps ingest.keep_versions of them). */
export const DELTA_DEPTH = 8;
/** The response header with the SHA-256 (hex) of the current version's canonical JSON (RFC 8785). */
export const CANONICAL_DIGEST = 'json-canonical-sha256';
export const DELTA_VARY = 'Accept-Encoding, A-IM, If-None-Match';

export type { Im } from './patches.js';
const MEDIA: Record<Im, string> = { 'json-patch': 'application/json-patch+json', 'merge-patch': 'application/merge-patch+json' };
type Encoded = Partial<Record<'identity' | 'gzip' | 'br', Buffer>>;
type Pair = Partial<Record<Im, Encoded>>;
const GONE: Pair = {};

export interface Deltas {
  /** The answer to a GET of `variant` of `version` that carries A-IM. */
  answer(version: Version, variant: Variant, headers: IncomingHttpHeaders): Promise<Answer>;
}

export interface DeltaDeps {
  readonly published: Pick<PublishedCache, 'onInstall'>;
  readonly bytes: VersionBytes;
  /** The sha256s of a file's newest versions, newest first (src/catalog/recent-versions.ts). */
  readonly shas: (filename: string, n: number) => Promise<string[]>;
  readonly log: Logger;
  /** Bytes of patches kept (default 16 MiB). */
  readonly maxBytes?: number;
}

/** The instance-manipulations the client takes (q > 0), from A-IM; anything else is ignored. */
export function parseAIm(header: string | undefined): Set<Im> {
  const out = new Set<Im>();
  if (header === undefined || header.length > 256) return out;
  for (const part of header.split(',')) {
    const [name, ...params] = part.split(';');
    const im = name!.trim().toLowerCase();
    if (im !== 'json-patch' && im !== 'merge-patch') continue;
    const q = params.map((p) => /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p)).find((m) => m !== null);
    if (q === undefined || Number(q[1]) > 0) out.add(im);
  }
  return out;
}

/** The 32 hex digits of the first ETag in If-None-Match that is not the current version's (any coding's form). */
export function baseOf(ifNoneMatch: string, current: string): string | undefined {
  for (const raw of ifNoneMatch.split(',', 16)) {
    const m = /^(?:W\/)?"([0-9a-f]{32})(?:-gz|-br)?"$/.exec(raw.trim());
    if (m && m[1] !== current) return m[1];
  }
  return undefined;
}

export function createDeltas(deps: DeltaDeps): Deltas {
  const { bytes, log } = deps;
  const digests = new WeakMap<Version, string>();
  const recent = new Map<string, Promise<string[]>>();
  deps.published.onInstall((v) => recent.delete(v.entry.filename));

  const canonicalOf = (version: Version, doc?: unknown): string => {
    const c = canonicalize(doc ?? JSON.parse(version.identity.body.toString('utf8')))!;
    if (!digests.has(version)) digests.set(version, sha256Hex(c));
    return c;
  };
  const digestOf = (version: Version): string => {
    const d = digests.get(version);
    if (d !== undefined) return d;
    canonicalOf(version);
    return digests.get(version)!;
  };

  /** The newest versions of a file, cached until the reader installs another (only when the list starts with the held one). */
  const shasOf = (version: Version): Promise<string[]> => {
    const name = version.entry.filename;
    let p = recent.get(name);
    if (p === undefined) {
      p = deps.shas(name, DELTA_DEPTH + 1);
      const mine = p;
      recent.set(name, p);
      mine.then(
        (list) => list[0] !== version.entry.sha256 && recent.get(name) === mine && recent.delete(name),
        () => recent.get(name) === mine && recent.delete(name),
      );
    }
    return p;
  };

  const encode = async (patch: unknown): Promise<Encoded> => {
    const identity = Buffer.from(JSON.stringify(patch));
    const [gzip, br] = await Promise.all([compress(identity, 'gzip'), compress(identity, 'br')]);
    return { identity, gzip, br };
  };

  const build = async (version: Version, baseSha: string): Promise<Pair> => {
    const baseBytes = await bytes.get(version.entry.filename, baseSha);
    if (baseBytes === undefined) return GONE;
    const from = JSON.parse(baseBytes.toString('utf8')) as Json;
    const to = JSON.parse(version.identity.body.toString('utf8')) as Json;
    const target = canonicalOf(version, to);
    const pair: Pair = {};
    for (const [im, patch] of Object.entries(makePatches(from, to, target)) as [Im, unknown][]) pair[im] = await encode(patch);
    return pair;
  };

  const pairs = new LRUCache<string, Pair, { version: Version; baseSha: string }>({
    maxSize: deps.maxBytes ?? 16 * 1024 * 1024,
    sizeCalculation: (p) => 64 + Object.values(p).reduce((n, e) => n + Object.values(e).reduce((m, b) => m + b.length, 0), 0),
    fetchMethod: (_key, _stale, { context }) => build(context.version, context.baseSha),
  });

  const withDigest = (a: Answer, version: Version): Answer => {
    if (a.status === 200) a.headers.push(CANONICAL_DIGEST, digestOf(version));
    return a;
  };

  return {
    async answer(version, variant, headers) {
      const plain = dataAnswer(version, variant, headers);
      const aim = headers['a-im'];
      const ims = parseAIm(typeof aim === 'string' ? aim : undefined);
      const inm = headers['if-none-match'];
      const current = version.entry.sha256.slice(0, 32);
      const base = plain.status === 200 && ims.size > 0 && inm !== undefined ? baseOf(inm, current) : undefined;
      if (base === undefined) return withDigest(plain, version);
      let pair: Pair | undefined;
      try {
        const list = await withTimeout(shasOf(version), 1000, 'reading recent versions');
        const baseSha = list.slice(1).find((s) => s.startsWith(base));
        if (baseSha === undefined) return withDigest(plain, version);
        const key = `${version.entry.filename}/${baseSha}/${version.entry.sha256}`;
        pair = await pairs.fetch(key, { context: { version, baseSha } });
      } catch (err) {
        log.warn({ err, filename: version.entry.filename }, 'cannot make a delta; answering with the whole file');
        return withDigest(plain, version);
      }
      const accept = parseAcceptEncoding(headers['accept-encoding']);
      let best: { im: Im; coding: 'identity' | 'gzip' | 'br'; body: Buffer } | undefined;
      for (const im of ims) {
        const enc = pair?.[im];
        if (enc === undefined) continue;
        for (const coding of ['identity', 'gzip', 'br'] as const) {
          const body = enc[coding];
          if (body === undefined || (coding !== 'identity' && !accept[coding])) continue;
          if (best === undefined || body.length < best.body.length) best = { im, coding, body };
        }
      }
      if (best === undefined || best.body.length >= variant.body.length) return withDigest(plain, version);
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
        best.im,
        'delta-base',
        `"${base}"`,
        'content-type',
        MEDIA[best.im],
      ];
      if (best.coding !== 'identity') out.push('content-encoding', best.coding);
      out.push(CANONICAL_DIGEST, digestOf(version));
      return { status: 226, headers: out, body: best.body };
    },
  };
}

/** The deltas of a reader: older versions from `store`, the recent versions listed in Redis. */
export function createReaderDeltas(deps: {
  store: Pick<Store, 'get'>;
  redis: Pick<Redis, 'lrange'>;
  prefix: string;
  published: Pick<PublishedCache, 'onInstall'>;
  log: Logger;
}): Deltas {
  const recent = createRecentVersions(deps.redis, redisKeys(deps.prefix));
  return createDeltas({ published: deps.published, bytes: createVersionBytes({ store: deps.store }), shas: (f, n) => recent.shas(f, n), log: deps.log });
}
