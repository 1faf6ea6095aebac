/**
 * A published version's bytes, carried to readers in other processes through Redis pub/sub, so
 * they hold it without reading the store back (on S3: one GET per version per reader saved, and
 * its latency taken off freshness).
 *
 * The worker publishes the carried message on the bytes channel as soon as it has decided to
 * publish a version, before its store write, on the connection it later commits on: every
 * subscriber of both channels (on one connection) has the bytes before the announcement, and the
 * carrying costs the publish nothing on its way (a separate PUBLISH, sent while the store write
 * runs; inside the commit script the bytes would slow every commit). A reader
 * keeps carried bytes, a few and briefly, until the announcement of the same sha256 and size
 * takes them (CarriedBytes). Bytes of a version that is then not committed (the store write
 * failed, a newer one won) are dropped unused.
 *
 * The message is the version's sha256 (64 hex characters) followed by its bytes.
 */
import type { CatalogEntry } from './types.js';

const SHA_HEX = 64;
const SHA_RE = /^[0-9a-f]{64}$/;

export function encodeCarried(sha256: string, bytes: Buffer): Buffer {
  return Buffer.concat([Buffer.from(sha256, 'latin1'), bytes]);
}

export interface CarriedBytes {
  /** Keep a carried message (ignored if malformed), until its announcement or until evicted. */
  put(message: Buffer): void;
  /** Keep `bytes` (not copied: the caller no longer changes them) as carried for `sha256`. */
  hold(sha256: string, bytes: Buffer): void;
  /** The bytes carried for `entry` (same sha256 and size), taken out; undefined if none. */
  take(entry: CatalogEntry): Buffer | undefined;
  readonly size: number;
  clear(): void;
}

export interface CarriedBytesLimits {
  /** Most messages kept (oldest evicted first). */
  readonly maxEntries: number;
  /** Most bytes kept. */
  readonly maxBytes: number;
  /** Longest a message waits for its announcement. */
  readonly maxAgeMs: number;
  readonly now?: () => number;
}

/**
 * Carried bytes waiting for their announcement, bounded in count, bytes and age. An announcement
 * follows its bytes within the worker's store write (milliseconds), so a few entries suffice.
 * Kept as copies: the Redis parser hands out slices of a shared pool, which a held version must
 * not pin.
 */
export function createCarriedBytes(limits: CarriedBytesLimits = { maxEntries: 32, maxBytes: 16 * 1024 * 1024, maxAgeMs: 30_000 }): CarriedBytes {
  const now = limits.now ?? (() => performance.now());
  const held = new Map<string, { bytes: Buffer; at: number }>();
  let bytesHeld = 0;
  const drop = (sha: string) => {
    const e = held.get(sha);
    if (!e) return;
    held.delete(sha);
    bytesHeld -= e.bytes.length;
  };
  /** Evict, oldest first, until a message of `incoming` bytes (if any) fits and nothing left is too old. */
  const sweep = (t: number, incoming: number) => {
    const room = incoming > 0 ? 1 : 0;
    for (const [k, e] of held) {
      if (held.size + room <= limits.maxEntries && bytesHeld + incoming <= limits.maxBytes && t - e.at <= limits.maxAgeMs) break;
      drop(k);
    }
  };
  const keep = (sha: string, bytes: Buffer) => {
    if (bytes.length > limits.maxBytes) return;
    drop(sha);
    const t = now();
    sweep(t, bytes.length);
    held.set(sha, { bytes, at: t });
    bytesHeld += bytes.length;
  };
  return {
    put(message) {
      if (message.length <= SHA_HEX) return;
      const sha = message.toString('latin1', 0, SHA_HEX);
      if (!SHA_RE.test(sha) || message.length - SHA_HEX > limits.maxBytes) return;
      keep(sha, Buffer.from(message.subarray(SHA_HEX)));
    },
    hold(sha256, bytes) {
      if (SHA_RE.test(sha256)) keep(sha256, bytes);
    },
    take(entry) {
      const t = now();
      const e = held.get(entry.sha256);
      drop(entry.sha256);
      // Whatever waited too long goes too (bytes of a version never committed): none are kept for long.
      sweep(t, 0);
      if (!e || e.bytes.length !== entry.size || t - e.at > limits.maxAgeMs) return undefined;
      return e.bytes;
    },
    get size() {
      return held.size;
    },
    clear() {
      held.clear();
      bytesHeld = 0;
    },
  };
}
