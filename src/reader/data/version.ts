/**
 * One published version held in memory: the identity bytes, their compressed variants (made on
 * the first request that accepts each coding, once per version: variants.ts) and everything the
 * response headers need, computed once.
 */
import { createHash } from 'node:crypto';
import type { CatalogEntry } from '../../catalog/types.js';
import type { Coding } from './encoding.js';
import { sha256Hex } from '../../sha256.js';

export interface Variant {
  readonly coding: Coding;
  readonly body: Buffer;
  /** Strong ETag, quoted; each coding has its own. */
  readonly etag: string;
}

export interface Version {
  readonly entry: CatalogEntry;
  /** Catalog sequence number this version was learned at (orders corrections). */
  readonly seq: number;
  readonly identity: Variant;
  /** Made on demand (variants.ts); undefined until then, and when compressing did not pay. */
  gzip: Variant | undefined;
  br: Variant | undefined;
  /** Per compressed coding: being made (the promise every asking request waits for), or settled. */
  readonly making: { gzip?: Promise<Variant | undefined> | 'settled'; br?: Promise<Variant | undefined> | 'settled' };
  /** HTTP date of publishedAt. */
  readonly lastModified: string;
  readonly lastModifiedMs: number;
}

/** Thrown when the bytes in the store are not the ones the catalog names. */
export class VersionMismatchError extends Error {}

/** A version from bytes read back from the store: they must hash to what the catalog names. */
export function makeVersion(entry: CatalogEntry, seq: number, bytes: Buffer): Version {
  return checked(entry, seq, bytes, sha256Hex(bytes));
}

/**
 * makeVersion() for the reader's loads: the bytes are hashed in slices of HASH_SLICE with a turn
 * of the event loop between them, so that a version of tens of MB never holds the serving loop
 * for more than a slice's hashing (about a millisecond).
 */
export async function loadVersion(entry: CatalogEntry, seq: number, bytes: Buffer): Promise<Version> {
  const hash = createHash('sha256');
  for (let i = 0; i < bytes.length; i += HASH_SLICE) {
    if (i > 0) await new Promise((resolve) => setImmediate(resolve));
    hash.update(bytes.subarray(i, i + HASH_SLICE));
  }
  return checked(entry, seq, bytes, hash.digest('hex'));
}

export const HASH_SLICE = 1024 * 1024;

function checked(entry: CatalogEntry, seq: number, bytes: Buffer, sha: string): Version {
  if (sha !== entry.sha256) {
    throw new VersionMismatchError(`${entry.object}: bytes hash to ${sha}, the catalog says ${entry.sha256}`);
  }
  return trustedVersion(entry, seq, bytes);
}

/** A version from bytes whose hash is known (the publish step of this process just wrote them). */
export function trustedVersion(entry: CatalogEntry, seq: number, bytes: Buffer): Version {
  const publishedMs = Date.parse(entry.publishedAt);
  const lastModifiedMs = Number.isFinite(publishedMs) ? publishedMs : Date.now();
  return {
    entry,
    seq,
    identity: { coding: 'identity', body: bytes, etag: etagFor(entry.sha256, 'identity') },
    gzip: undefined,
    br: undefined,
    making: {},
    lastModified: new Date(lastModifiedMs).toUTCString(),
    lastModifiedMs,
  };
}

export function etagFor(sha256: string, coding: Coding): string {
  const base = sha256.slice(0, 32);
  return coding === 'identity' ? `"${base}"` : `"${base}-${coding === 'gzip' ? 'gz' : 'br'}"`;
}

/** Is `entry` (learned at `seq`) a later version than `held`? Equal generated_at: the later commit. */
type Ordered = Pick<CatalogEntry, 'sha256' | 'generatedAtMs'>;

export function supersedes(entry: Ordered, seq: number, held: { entry: Ordered; seq: number }): boolean {
  if (entry.sha256 === held.entry.sha256) return false;
  if (entry.generatedAtMs !== held.entry.generatedAtMs) return entry.generatedAtMs > held.entry.generatedAtMs;
  return seq > held.seq;
}
