/**
 * SHA-256 in hex: Node's own hash where there is one (at once, no thread-pool hop: a patched
 * version is checked on the way to its file), else Web Crypto (browsers, Deno, Bun, workers).
 */
import type * as NodeCrypto from 'node:crypto';

const encoder = new TextEncoder();
const nodeCrypto = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process?.getBuiltinModule?.('node:crypto') as
  typeof NodeCrypto | undefined;

export async function sha256Hex(data: Uint8Array | string): Promise<string> {
  if (nodeCrypto) return nodeCrypto.createHash('sha256').update(data).digest('hex');
  const bytes = typeof data === 'string' ? encoder.encode(data) : data;
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>));
  let out = '';
  for (const b of digest) out += b.toString(16).padStart(2, '0');
  return out;
}

/** The ETag the service gives a version (the identity coding's): the first 32 hex digits of its SHA-256, quoted. */
export const etagOf = (sha256: string): string => `"${sha256.slice(0, 32)}"`;

/** Any coding's ETag of a version (`"…"`, `"…-gz"`, `"…-br"`, weak or not) as the identity one; undefined when it is not the service's. */
export function identityEtag(etag: string | null): string | undefined {
  const m = /^(?:W\/)?"([0-9a-f]{32})(?:-gz|-br)?"$/.exec(etag ?? '');
  return m ? `"${m[1]}"` : undefined;
}
