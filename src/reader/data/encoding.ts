/**
 * Content codings: choosing one from Accept-Encoding (RFC 9110 §12.5.3, with q-values), making
 * the compressed variants of a version (once per version and coding) and evaluating
 * If-None-Match (weak comparison, lists and `*`).
 */
import { promisify } from 'node:util';
import { brotliCompress, brotliCompressSync, constants, gzip, gzipSync, type BrotliOptions } from 'node:zlib';

export type Coding = 'br' | 'gzip' | 'identity';

const gzipAsync = promisify(gzip);
const brotliAsync = promisify(brotliCompress);

export interface CodingPreference {
  readonly br: boolean;
  readonly gzip: boolean;
}

const NONE: CodingPreference = { br: false, gzip: false };

/**
 * Which compressed codings the client takes, in our order of preference (br before gzip unless
 * gzip has the higher q-value). Identity is always possible: we never answer 406.
 */
export function parseAcceptEncoding(header: string | undefined): CodingPreference & { gzipFirst: boolean } {
  if (!header) return { ...NONE, gzipFirst: false };
  let br: number | undefined;
  let gz: number | undefined;
  let star: number | undefined;
  for (const part of header.split(',')) {
    const [rawName, ...params] = part.split(';');
    const name = rawName!.trim().toLowerCase();
    let q = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p);
      if (m) q = Math.min(1, Math.max(0, Number(m[1]) || 0));
    }
    if (name === 'br') br = q;
    else if (name === 'gzip' || name === 'x-gzip') gz = Math.max(gz ?? 0, q);
    else if (name === '*') star = q;
  }
  const qBr = br ?? star ?? 0;
  const qGz = gz ?? star ?? 0;
  return { br: qBr > 0, gzip: qGz > 0, gzipFirst: qGz > qBr };
}

/** A small memo of parsed Accept-Encoding values: clients send few distinct ones. */
export function createCodingNegotiator(maxEntries = 256): (header: string | undefined) => ReturnType<typeof parseAcceptEncoding> {
  const memo = new Map<string, ReturnType<typeof parseAcceptEncoding>>();
  return (header) => {
    if (!header) return parseAcceptEncoding(undefined);
    let v = memo.get(header);
    if (v === undefined) {
      v = parseAcceptEncoding(header);
      if (memo.size >= maxEntries) memo.clear();
      memo.set(header, v);
    }
    return v;
  };
}

export type CompressedCoding = Exclude<Coding, 'identity'>;

/**
 * gzip at level 6, brotli at quality 5: cheap enough to make on a request, and they leave a
 * small part of the bytes; made once per version and coding, on the first request that accepts the coding (variants.ts).
 */
export function compress(bytes: Buffer, coding: CompressedCoding): Promise<Buffer> {
  return coding === 'gzip' ? gzipAsync(bytes, GZIP_OPTIONS) : brotliAsync(bytes, brotliOptions(bytes.length));
}

/** compress(), at once: for worker threads (src/reader/deltas/build.ts), never a serving loop. */
export function compressSync(bytes: Buffer, coding: CompressedCoding): Buffer {
  return coding === 'gzip' ? gzipSync(bytes, GZIP_OPTIONS) : brotliCompressSync(bytes, brotliOptions(bytes.length));
}

const GZIP_OPTIONS = { level: 6 };
const brotliOptions = (size: number): BrotliOptions => ({
  params: {
    [constants.BROTLI_PARAM_QUALITY]: 5,
    [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
    [constants.BROTLI_PARAM_SIZE_HINT]: size,
  },
});

/**
 * If-None-Match against the current representation's ETag: true when the client's copy is
 * current (weak comparison, as RFC 9110 requires for this header). The ETags of one version's
 * codings (`"…"`, `"…-gz"`, `"…-br"`) are weakly equal: the same document, however it was sent.
 */
export function etagMatches(ifNoneMatch: string, etag: string): boolean {
  if (ifNoneMatch === etag) return true;
  const trimmed = ifNoneMatch.trim();
  if (trimmed === '*') return true;
  // The codings of one version are the same document: a copy kept under any of its ETags is current.
  const version = versionTag(etag);
  for (const raw of trimmed.split(',')) {
    let tag = raw.trim();
    if (tag.startsWith('W/')) tag = tag.slice(2);
    if (tag === etag || versionTag(tag) === version) return true;
  }
  return false;
}

/** An ETag without its coding's suffix (`"…-gz"`, `"…-br"` → `"…"`). */
function versionTag(tag: string): string {
  return tag.endsWith('-gz"') || tag.endsWith('-br"') ? `${tag.slice(0, -4)}"` : tag;
}

/** If-Modified-Since (only consulted without If-None-Match): true when not modified since. */
export function notModifiedSince(ifModifiedSince: string, lastModifiedMs: number): boolean {
  const since = Date.parse(ifModifiedSince);
  return Number.isFinite(since) && Math.floor(lastModifiedMs / 1000) * 1000 <= since;
}
