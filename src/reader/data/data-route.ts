/**
 * GET /v1/data/{filename}: the published bytes from memory (the checks before it are the v1
 * handler's). A name is only ever a key of the in-memory map, never part of a path.
 * Conditional requests and content-coding negotiation on top: the first request of a version that
 * accepts a coding waits for it to be made (a few ms, once per version and coding); every other
 * request is answered from memory at once.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Answer } from './answer.js';
import type { PublishedCache } from './cache.js';
import { createCodingNegotiator, etagMatches, notModifiedSince, type CompressedCoding } from './encoding.js';
import type { Variant, Version } from './version.js';

export const CACHE_CONTROL = 'private, no-cache';
/** The document's `generated_at`, so that a client sees how fresh a file is without parsing it. */
export const GENERATED_AT = 'generated-at';
/** The route of downloads: a wildcard, so that every name goes through the checks in order. */
export const DATA_PREFIX = '/v1/data/';
/** The route's pattern (Fastify's routeOptions.url, the metrics' route label). */
export const DATA_ROUTE = `${DATA_PREFIX}*`;
/** A-IM too: a request with it may be answered with a delta (delta.ts). */
export const VARY = 'Accept-Encoding, A-IM';
/** The longest filename the route takes (Fastify's maxParamLength): longer ones are 404. */
export const MAX_NAME_LENGTH = 200;

/** Chooses the representation of a version for an Accept-Encoding header (shared by both lanes). */
export type VariantPicker = (version: Version, acceptEncoding: string | undefined) => Variant | Promise<Variant>;

export function createVariantPicker(published: PublishedCache): VariantPicker {
  const negotiate = createCodingNegotiator();

  /** The compressed codings the client takes, in the order to try them. */
  const codings = (acceptEncoding: string | undefined): readonly CompressedCoding[] => {
    if (acceptEncoding === undefined) return NONE;
    const pref = negotiate(acceptEncoding);
    if (pref.br && pref.gzip) return pref.gzipFirst ? GZIP_BR : BR_GZIP;
    return pref.br ? BR : pref.gzip ? GZIP : NONE;
  };

  /** The first of `order` that exists (made now if need be), else identity. */
  const pick = (version: Version, order: readonly CompressedCoding[], from = 0): Variant | Promise<Variant> => {
    for (let i = from; i < order.length; i++) {
      const v = published.variant(version, order[i]!);
      if (v === undefined) continue;
      if (v instanceof Promise) return v.then((made) => made ?? pick(version, order, i + 1));
      return v;
    }
    return version.identity;
  };

  return (version, acceptEncoding) => pick(version, codings(acceptEncoding));
}

/** The headers a 200 and a 304 of `variant` share: its validators, its time facts, how to cache it. */
function versionHeaders(version: Version, variant: Variant): string[] {
  return ['etag', variant.etag, 'last-modified', version.lastModified, GENERATED_AT, version.entry.generatedAt, 'cache-control', CACHE_CONTROL, 'vary', VARY];
}

/** Whether the request's validators match `variant` of `version` (a 304). */
export function isNotModified(version: Version, variant: Variant, headers: IncomingHttpHeaders): boolean {
  const inm = headers['if-none-match'];
  const ims = headers['if-modified-since'];
  return inm !== undefined ? etagMatches(inm, variant.etag) : ims !== undefined && notModifiedSince(ims, version.lastModifiedMs);
}

/** The answer to a GET of `variant` of `version`: 304 when the request's validators match. */
export function dataAnswer(version: Version, variant: Variant, headers: IncomingHttpHeaders): Answer {
  if (isNotModified(version, variant, headers)) return { status: 304, headers: versionHeaders(version, variant) };
  const out = versionHeaders(version, variant);
  out.push('content-type', 'application/json');
  if (variant.coding !== 'identity') out.push('content-encoding', variant.coding);
  return { status: 200, headers: out, body: variant.body };
}

const NONE: readonly CompressedCoding[] = [];
const BR: readonly CompressedCoding[] = ['br'];
const GZIP: readonly CompressedCoding[] = ['gzip'];
const BR_GZIP: readonly CompressedCoding[] = ['br', 'gzip'];
const GZIP_BR: readonly CompressedCoding[] = ['gzip', 'br'];
