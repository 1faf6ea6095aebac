/**
 * What a reader needs of a version to answer deltas, built off its serving loop (in a worker
 * thread: build-worker.ts): the SHA-256 of its canonical JSON (RFC 8785), and the patches from
 * an earlier version (patches.ts), each in every coding. A document that has no canonical form
 * (a version published before documents had to be I-JSON: a number past a double) has no digest
 * and no patches: it is served whole.
 */
import { compressSync } from '../data/encoding.js';
import type { Json } from './merge-patch.js';
import { canonicalSha256 } from './canonical.js';
import type { ParsedDocs } from './parsed-docs.js';
import { IMS, makePatches, type Im } from './patches.js';

export type Encoded = Readonly<Record<'identity' | 'gzip' | 'br', Buffer>>;
export type Patches = Partial<Record<Im, Encoded>>;

export interface Built {
  /** SHA-256 (hex) of the target's canonical JSON; null: it has none. */
  readonly digest: string | null;
  /** From the base to the target, of the IMs asked; one is missing when no patch of it rebuilds the target. */
  readonly patches: Patches;
}

/** The SHA-256s of a build's versions and the parsed documents kept between builds (parsed-docs.ts). */
export interface BuildCache {
  readonly docs: ParsedDocs;
  readonly toSha: string;
  readonly fromSha?: string;
}

const parse = (bytes: Buffer) => JSON.parse(bytes.toString('utf8')) as Json;

/**
 * Digest of `to`, and the patches of `ims` from `from` (when given) to `to`. Throws only on bytes
 * that are not JSON (or nested deeper than the stack allows). With `cache`, a base parsed by an
 * earlier build is taken from it, and the target is kept there for the next build.
 */
export function buildFacts(to: Buffer, from?: Buffer, ims: readonly Im[] = IMS, cache?: BuildCache): Built {
  const target = cache?.docs.take(cache.toSha) ?? parse(to);
  const digest = canonicalSha256(target);
  if (digest === null) return { digest: null, patches: {} };
  // Nothing below changes the target: the next build may use it as its base.
  cache?.docs.keep(cache.toSha, target, to.length);
  if (from === undefined || ims.length === 0) return { digest, patches: {} };
  const base = (cache?.fromSha !== undefined ? cache.docs.take(cache.fromSha) : undefined) ?? parse(from);
  const patches: Patches = {};
  for (const [im, patch] of Object.entries(makePatches(base, target, ims)) as [Im, unknown][]) {
    const identity = Buffer.from(JSON.stringify(patch));
    patches[im] = { identity, gzip: compressSync(identity, 'gzip'), br: compressSync(identity, 'br') };
  }
  return { digest, patches };
}
