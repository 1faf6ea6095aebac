import { createHash } from 'node:crypto';

/** The SHA-256 of `data` (a string as UTF-8), in hex: the form versions, ETags and digests use. */
export function sha256Hex(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}
