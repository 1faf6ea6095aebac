/** One version of a file as the client holds it: its bytes, exactly as the service publishes them. */
export interface FileVersion {
  readonly filename: string;
  /** The ETag of the identity answer (`"` + 32 hex digits of its SHA-256 + `"`), as changes name it. */
  readonly etag: string;
  /** The document's `generated_at` (ISO 8601). */
  readonly generatedAt: string;
  /** When the service published this version (ISO 8601). */
  readonly publishedAt: string;
  readonly bytes: Uint8Array;
  /** The bytes as text (decoded once). */
  text(): string;
  /** The bytes parsed (parsed on each call: the result is yours to change). */
  json<T = unknown>(): T;
}

const decoder = new TextDecoder();

/** `text`: the bytes as text, when the caller has it already. */
export function makeVersion(filename: string, etag: string, generatedAt: string, publishedAt: string, bytes: Uint8Array, text?: string): FileVersion {
  return {
    filename,
    etag,
    generatedAt,
    publishedAt,
    bytes,
    text: () => (text ??= decoder.decode(bytes)),
    json<T>() {
      return JSON.parse((text ??= decoder.decode(bytes))) as T;
    },
  };
}
