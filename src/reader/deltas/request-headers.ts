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

/** The 32 hex digits of the first ETag in If-None-Match that is not the current version's (any coding's form). */
export function baseOf(ifNoneMatch: string, current: string): string | undefined {
  for (const raw of ifNoneMatch.split(',', 16)) {
    const m = /^(?:W\/)?"([0-9a-f]{32})(?:-gz|-br)?"$/.exec(raw.trim());
    if (m && m[1] !== current) return m[1];
  }
  return undefined;
}

/** parseAIm that keeps the parse of the last header: clients send the same A-IM on every request. */
export function createAImParser(): (header: string | undefined) => ReadonlySet<Im> {
  let lastHeader: string | undefined;
  let last: ReadonlySet<Im> = parseAIm(undefined);
  return (header) => {
    if (header !== lastHeader) {
      last = parseAIm(header);
      lastHeader = header;
    }
    return last;
  };
}
