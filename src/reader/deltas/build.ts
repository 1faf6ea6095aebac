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
import { IMS, makePatches, type Im } from './patches.js';

export type Encoded = Readonly<Record<'identity' | 'gzip' | 'br', Buffer>>;
export type Patches = Partial<Record<Im, Encoded>>;

export interface Built {
  /** SHA-256 (hex) of the target's canonical JSON; null: it has none. */
  readonly digest: string | null;
  /** From the base to the target, of the IMs asked; one is missing when no patch of it rebuilds the target. */
  readonly patches: Patches;
}

/**
 * Digest of `to`, and the patches of `ims` from `from` (when given) to `to`. Throws only on bytes
 * that are not JSON (or nested deeper than the stack allows).
 */
export function buildFacts(to: Buffer, from?: Buffer, ims: readonly Im[] = IMS): Built {
  const target = JSON.parse(to.toString('utf8')) as Json;
  const digest = canonicalSha256(target);
  if (digest === null) return { digest: null, patches: {} };
  if (from === undefined || ims.length === 0) return { digest, patches: {} };
  const base = JSON.parse(from.toString('utf8')) as Json;
  const patches: Patches = {};
  for (const [im, patch] of Object.entries(makePatches(base, target, ims)) as [Im, unknown][]) {
    const identity = Buffer.from(JSON.stringify(patch));
    patches[im] = { identity, gzip: compressSync(identity, 'gzip'), br: compressSync(identity, 'br') };
  }
  return { digest, patches };
}
