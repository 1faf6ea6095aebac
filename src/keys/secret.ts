/**
 * API key material: generation and hashing. A key is `odf_` followed by 32 random bytes in
 * base64url (256 bits); only its SHA-256 is ever stored, and keys are looked up by it.
 */
import { hash, randomBytes } from 'node:crypto';

export const KEY_PREFIX = 'odf_';
/** Length of a key: the prefix plus 43 base64url characters. */
export const KEY_LENGTH = KEY_PREFIX.length + 43;
const KEY_RE = /^odf_[A-Za-z0-9_-]{43}$/;
/** Anything that looks like a key, for scrubbing text that may hold one (e.g. a logged URL). */
export const KEY_LIKE_RE = /odf_[A-Za-z0-9_-]{20,}/g;

export function generateApiKey(): string {
  return KEY_PREFIX + randomBytes(32).toString('base64url');
}

/** True when the text has the shape of a key (a cheap filter before hashing). */
export function looksLikeApiKey(text: unknown): text is string {
  return typeof text === 'string' && text.length === KEY_LENGTH && KEY_RE.test(text);
}

/** SHA-256 of the key (32 bytes). */
export function hashApiKey(key: string): Buffer {
  return hash('sha256', key, 'buffer');
}

/** SHA-256 of the key in hex: how it is stored, and how the reader looks it up. */
export function hashApiKeyHex(key: string): string {
  return hash('sha256', key, 'hex');
}

/** Replace anything key-shaped in a text (for log lines). */
export function scrubKeys(text: string): string {
  return text.includes(KEY_PREFIX) ? text.replace(KEY_LIKE_RE, 'odf_[redacted]') : text;
}
