/**
 * What a delta request asks for, read from its headers: the instance-manipulations it takes
 * (A-IM) and the version it holds (If-None-Match).
 */
import type { Im } from './patches.js';

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

/** One ETag of If-None-Match, in any coding's form, blanks around it allowed. */
const ETAG = /^\s*(?:W\/)?"([0-9a-f]{32})(?:-gz|-br)?"\s*$/;

/**
 * The 32 hex digits of the first ETag in If-None-Match that is not the current version's (any
 * coding's form); `currentSha256` is the current version's whole SHA-256. A single ETag, what
 * clients send, is read without splitting the header.
 */
export function baseOf(ifNoneMatch: string, currentSha256: string): string | undefined {
  if (!ifNoneMatch.includes(',')) {
    const m = ETAG.exec(ifNoneMatch);
    return m && !currentSha256.startsWith(m[1]!) ? m[1] : undefined;
  }
  for (const raw of ifNoneMatch.split(',', 16)) {
    const m = ETAG.exec(raw);
    if (m && !currentSha256.startsWith(m[1]!)) return m[1];
  }
  return undefined;
}

/**
 * parseAIm as a list, keeping the parse of the last header: clients send the same A-IM on every
 * request, and a delta answer allocates nothing for it.
 */
export function createAImParser(): (header: string | undefined) => readonly Im[] {
  let lastHeader: string | undefined;
  let last: readonly Im[] = Object.freeze([...parseAIm(undefined)]);
  return (header) => {
    if (header !== lastHeader) {
      last = Object.freeze([...parseAIm(header)]);
      lastHeader = header;
    }
    return last;
  };
}
