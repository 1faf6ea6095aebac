/**
 * What a reader needs of a version to answer deltas, built off its serving loop (in a worker
 * thread: build-worker.ts): the SHA-256 of its canonical JSON (RFC 8785), and the patches from
 * an earlier version (patches.ts), each in every coding. A document that has no canonical form
 * (a version published before documents had to be I-JSON: a number past a double) has no digest
 * and no patches: it is served whole.
 */
import canonicalize from 'canonicalize';
import { compressSync } from '../data/encoding.js';
import type { Json } from './merge-patch.js';
import { IMS, makePatches, type Im } from './patches.js';
import { sha256Hex } from '../../sha256.js';

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
 * that are not JSON.
 */
export function buildFacts(to: Buffer, from?: Buffer, ims: readonly Im[] = IMS): Built {
  const target = JSON.parse(to.toString('utf8')) as Json;
  let canonical: string | undefined;
  try {
    canonical = canonicalize(target);
  } catch {
    canonical = undefined; // e.g. Infinity: no canonical form
  }
  if (canonical === undefined) return { digest: null, patches: {} };
  const digest = sha256Hex(canonical);
  if (from === undefined || ims.length === 0) return { digest, patches: {} };
  const base = JSON.parse(from.toString('utf8')) as Json;
  const patches: Patches = {};
  for (const [im, patch] of Object.entries(makePatches(base, target, ims)) as [Im, unknown][]) {
    const identity = Buffer.from(JSON.stringify(patch));
    patches[im] = { identity, gzip: compressSync(identity, 'gzip'), br: compressSync(identity, 'br') };
  }
  return { digest, patches };
}
