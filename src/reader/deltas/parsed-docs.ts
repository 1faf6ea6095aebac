/**
 * Parsed documents a build thread keeps between builds, by the SHA-256 of their bytes. A live
 * file's versions are built one after the other (each from the one before), so the target a build
 * parsed is the base of the next: kept, it saves that build a parse. A base is used up by its
 * build (the JSON Patch is checked by applying it to the base in place), so taking one removes it.
 * Bounded by the bytes of the documents kept, small enough to leave the thread's heap to builds.
 */
import type { Json } from './merge-patch.js';

export interface ParsedDocs {
  /** The document of `sha256`, removed from the cache; undefined when not kept. */
  take(sha256: string): Json | undefined;
  /** Keep `doc` (parsed from `bytes` bytes) unless it alone passes the bound; the oldest go first. */
  keep(sha256: string, doc: Json, bytes: number): void;
  readonly size: number;
}

export function createParsedDocs(maxBytes: number): ParsedDocs {
  const docs = new Map<string, { doc: Json; bytes: number }>();
  let held = 0;
  const drop = (sha: string) => {
    const e = docs.get(sha);
    if (e === undefined) return undefined;
    docs.delete(sha);
    held -= e.bytes;
    return e.doc;
  };
  return {
    take: drop,
    keep(sha256, doc, bytes) {
      drop(sha256);
      if (bytes > maxBytes) return;
      for (const oldest of docs.keys()) {
        if (held + bytes <= maxBytes) break;
        drop(oldest);
      }
      docs.set(sha256, { doc, bytes });
      held += bytes;
    },
    get size() {
      return docs.size;
    },
  };
}
