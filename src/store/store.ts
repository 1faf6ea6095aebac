/**
 * The published store: immutable version objects plus the catalog manifest. Backends: the local
 * filesystem (file://) and S3 (s3://). Both pass test/store/contract.ts.
 *
 * Semantics every backend keeps:
 * - put() is atomic: a concurrent get() sees the old bytes or the new ones, never a mix or a
 *   partial object; once put() resolves the object is durable (unless put with durable: false).
 * - get() of a missing key throws StoreNotFoundError; every other failure StoreUnavailableError.
 * - delete() of a missing key succeeds (garbage collection may race).
 * - list(prefix) returns every key starting with prefix, sorted.
 */
export interface PutOptions {
  /**
   * false: the object need not survive a crash of the machine (still atomic: whole or absent to
   * every get). A filesystem store skips its fsyncs; S3 acknowledges only what it keeps anyway.
   * For bytes that are not yet acknowledged to anyone, such as an upload before its outcome.
   */
  readonly durable?: boolean;
}

export interface Store {
  /** Where the store is, for logs and status (no secrets). */
  readonly description: string;
  put(key: string, bytes: Buffer, contentType?: string, options?: PutOptions): Promise<void>;
  get(key: string): Promise<Buffer>;
  exists(key: string): Promise<boolean>;
  delete(key: string): Promise<void>;
  list(prefix: string): Promise<string[]>;
  /** Resolves when the store answers; throws StoreUnavailableError when it does not. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

const KEY_RE = /^[A-Za-z0-9_-][A-Za-z0-9._-]*(\/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$/;

/** Keys are relative paths of safe segments: no `..`, no leading `/`, no empty segment. */
export function assertValidKey(key: string): void {
  if (!KEY_RE.test(key) || key.split('/').some((s) => s === '.' || s === '..') || key.length > 900) {
    throw new TypeError(`invalid store key: ${JSON.stringify(key)}`);
  }
}

/** The manifest: the catalog mirrored in the store, so a reader with the store alone can serve. */
export const MANIFEST_KEY = 'manifest.json';

/** Where a version's bytes live: named by the content hash, so objects never change. */
export function objectKey(filename: string, sha256: string): string {
  return `objects/${filename}/${sha256}.json`;
}
