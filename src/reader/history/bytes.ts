/**
 * The answer for one older version's bytes (GET /v1/history/{filename}/{etag}): checked against
 * the sha256 the history names (never served under another version's ETag), immutable, and
 * compressed on demand like current files (variants.ts). The versions made are kept in a small
 * LRU bounded in bytes, so a version asked for often is compressed once; the identity bytes
 * themselves come from version-bytes.ts's cache.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { LRUCache } from 'lru-cache';
import type { HistoryVersion } from '../../catalog/history-index.js';
import type { CatalogEntry } from '../../catalog/types.js';
import { formatGeneratedAt } from '../../feeds/generated-at.js';
import type { Logger } from '../../log.js';
import { objectKey } from '../../store/store.js';
import type { Answer } from '../data/answer.js';
import { GENERATED_AT } from '../data/data-route.js';
import { createCodingNegotiator, etagMatches, type CompressedCoding } from '../data/encoding.js';
import { createVariantMaker } from '../data/variants.js';
import { makeVersion, type Variant, type Version } from '../data/version.js';

export const IMMUTABLE = 'private, max-age=31536000, immutable';

export interface HistoryBytes {
  answer(filename: string, v: HistoryVersion, bytes: Buffer, headers: IncomingHttpHeaders): Answer | Promise<Answer>;
}

export interface HistoryBytesDeps {
  readonly log: Logger;
  /** Bytes of versions (and their compressed variants) kept made (default 16 MiB). */
  readonly maxBytes?: number;
  readonly compress?: boolean;
}

export function createHistoryBytes(deps: HistoryBytesDeps): HistoryBytes {
  const made = new LRUCache<string, Version>({
    maxSize: deps.maxBytes ?? 16 * 1024 * 1024,
    // The identity bytes and about what both compressed variants add.
    sizeCalculation: (v) => Math.max(64, Math.ceil(v.identity.body.length * 1.25)),
  });
  const variantOf = createVariantMaker({ log: deps.log, enabled: deps.compress ?? true });
  const negotiate = createCodingNegotiator();

  const versionOf = (filename: string, v: HistoryVersion, bytes: Buffer): Version => {
    const key = `${filename}/${v.sha256}`;
    let version = made.get(key);
    if (!version) {
      const entry: CatalogEntry = {
        filename,
        bookmaker: '',
        kind: 'live' as CatalogEntry['kind'],
        sport: null,
        object: objectKey(filename, v.sha256),
        sha256: v.sha256,
        size: v.size,
        generatedAt: formatGeneratedAt(v.generatedAtMs),
        generatedAtMs: v.generatedAtMs,
        publishedAt: new Date(v.publishedMs).toISOString(),
      };
      // Throws when the store's bytes are not the ones named: a 500, never another version's bytes.
      version = makeVersion(entry, v.seq, bytes);
      made.set(key, version);
    }
    return version;
  };

  const respond = (version: Version, variant: Variant, headers: IncomingHttpHeaders): Answer => {
    const out = [
      'etag',
      variant.etag,
      'last-modified',
      version.lastModified,
      GENERATED_AT,
      version.entry.generatedAt,
      'cache-control',
      IMMUTABLE,
      'vary',
      'Accept-Encoding',
    ];
    const inm = headers['if-none-match'];
    if (inm !== undefined && etagMatches(inm, variant.etag)) return { status: 304, headers: out };
    out.push('content-type', 'application/json');
    if (variant.coding !== 'identity') out.push('content-encoding', variant.coding);
    return { status: 200, headers: out, body: variant.body };
  };

  const pick = (version: Version, order: readonly CompressedCoding[], from = 0): Variant | Promise<Variant> => {
    for (let i = from; i < order.length; i++) {
      const v = variantOf(version, order[i]!);
      if (v === undefined) continue;
      if (v instanceof Promise) return v.then((got) => got ?? pick(version, order, i + 1));
      return v;
    }
    return version.identity;
  };

  return {
    answer(filename, v, bytes, headers) {
      const version = versionOf(filename, v, bytes);
      const ae = headers['accept-encoding'];
      const pref = negotiate(typeof ae === 'string' ? ae : undefined);
      const order: CompressedCoding[] =
        pref.br && pref.gzip ? (pref.gzipFirst ? ['gzip', 'br'] : ['br', 'gzip']) : pref.br ? ['br'] : pref.gzip ? ['gzip'] : [];
      const variant = pick(version, order);
      return variant instanceof Promise ? variant.then((got) => respond(version, got, headers)) : respond(version, variant, headers);
    },
  };
}
