/**
 * A published version's bytes, carried to readers in other processes through Redis pub/sub, so
 * they hold it without reading the store back (on S3: one GET per version per reader saved, and
 * its latency taken off freshness). The commit script publishes the carried message on the bytes
 * channel right before the announcement, in the same script: a subscriber of both channels on one
 * connection gets the pair in that order, with nothing in between. The message is the version's
 * sha256 (64 hex characters) followed by its bytes; the announcement that follows names the same
 * sha256 and size, or the carried bytes are not used.
 */
import type { CatalogEntry } from './types.js';

const SHA_HEX = 64;

export function encodeCarried(sha256: string, bytes: Buffer): Buffer {
  return Buffer.concat([Buffer.from(sha256, 'latin1'), bytes]);
}

/**
 * The bytes of `entry` if `message` carries them, copied out of the message (the Redis parser's
 * buffers may be slices of a shared pool, which a held version must not pin); else undefined.
 */
export function carriedBytesFor(entry: CatalogEntry, message: Buffer | undefined): Buffer | undefined {
  if (!message || message.length !== SHA_HEX + entry.size) return undefined;
  if (message.toString('latin1', 0, SHA_HEX) !== entry.sha256) return undefined;
  return Buffer.from(message.subarray(SHA_HEX));
}
