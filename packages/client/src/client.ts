/**
 * A client that keeps the current version of every file a key may read: it lists them from
 * /v1/catalog, follows /v1/stream from that position (server-sent events read over fetch), and
 * fetches each changed file as a JSON Patch from the version it holds when the service offers
 * one, else whole (fetch-version.ts). It hands each change to its reader, in order, through an
 * async iterator, and only then moves its position: a reader that stores `position` with what it
 * wrote resumes from there and misses nothing.
 *
 * It never holds a torn version (every version's bytes match their ETag) nor an older one (a
 * change or answer older than the version held is ignored). A stream that ends, a network error,
 * 429 or 503 are retried (Retry-After honoured, jittered backoff); a position the log no longer
 * has (410, or the event `reset`) lists everything again; on each reconnect and every `relistMs`
 * the catalog is read again for files that joined or left the key's list. A refused key (401),
 * a revoked one (event `revoked`), a key without access (403) end the iterator with an
 * OddsfilesClientError.
 */
import { OddsfilesClientError, problemDetail } from './errors.js';
import { createVersionFetcher, MAX_FILE_BYTES, type Announced } from './fetch-version.js';
import { backoffMs, createHttp, readBounded, type Notice } from './http.js';
import { readSse } from './sse.js';
import type { FileVersion } from './version.js';

export interface ClientOptions {
  /** The service's base URL, e.g. https://odds.example.com. */
  readonly url: string | URL;
  readonly key: string;
  /** Ask the stream to send at most one write per this many ms (the latest change of each file). */
  readonly conflateMs?: number | undefined;
  /** Resume after this position (from a previous run's `position`); without it: list from the catalog. */
  readonly position?: number | undefined;
  /** The versions held from a previous run (patches are asked from them; held versions are not fetched again). */
  readonly files?: Iterable<FileVersion> | undefined;
  /** Read the catalog again this often while streaming, for files that join or leave the key's list (default 5 minutes). */
  readonly relistMs?: number | undefined;
  /** A stream silent this long (no event, no heartbeat) is taken as dead and reopened (default 45 s). */
  readonly idleMs?: number | undefined;
  /** Network failures tolerated before the service was ever reached (default 3). */
  readonly firstContactAttempts?: number | undefined;
  readonly maxBackoffMs?: number | undefined;
  /** An answer (a file, a patch, the catalog) larger than this, decoded, is refused with a `protocol` error (default 256 MiB). */
  readonly maxFileBytes?: number | undefined;
  readonly fetch?: typeof fetch | undefined;
  /** Retries, reconnects and relists, for logging. */
  readonly onNotice?: ((n: Notice) => void) | undefined;
}

interface Lag {
  /** ms from the document's generated_at to when the client held it. */
  readonly generated: number;
  /** ms from its publication to when the client held it. */
  readonly published: number;
}

export type Change =
  | {
      readonly type: 'update';
      readonly filename: string;
      readonly etag: string;
      readonly previousEtag: string | null;
      readonly generatedAt: string;
      readonly publishedAt: string;
      /** The change position this version was announced at (the catalog's, when listed). */
      readonly position: number;
      readonly file: FileVersion;
      readonly via: 'patch' | 'whole';
      /** Bytes of the answer's body as sent (compressed, or the patch). */
      readonly wireBytes: number;
      readonly lagMs: Lag;
    }
  | {
      readonly type: 'remove';
      readonly filename: string;
      readonly previousEtag: string;
      readonly position: number;
      /** `not-listed`: no longer in the key's catalog; `gone`: its GET answered 403 or 404. */
      readonly reason: 'not-listed' | 'gone';
    };

export interface OddsfilesClient {
  /** The versions held now, by filename. */
  readonly files: ReadonlyMap<string, FileVersion>;
  /** The position every held version is current at (undefined before the first listing). */
  readonly position: number | undefined;
  /**
   * The changes, in order; `follow: false` lists once (from the catalog) and ends. One iteration
   * at a time. Ends with an OddsfilesClientError when it cannot go on, or when `close()` is called.
   */
  changes(options?: { follow?: boolean }): AsyncGenerator<Change, void, undefined>;
  close(): void;
}

interface ChangeJson {
  position: number;
  filename: string;
  etag: string;
  previous_etag: string | null;
  generated_at: string;
  published_at: string;
}

const decoder = new TextDecoder();

interface CatalogJson {
  position: number;
  files: { filename: string; etag: string; generated_at: string; published_at: string }[];
}

export function parseBaseUrl(url: string | URL): URL {
  let base: URL;
  try {
    base = new URL(url);
  } catch {
    throw new OddsfilesClientError('bad-url', `not a URL: "${String(url)}" (give the service's address, such as https://odds.example.com)`);
  }
  if (base.protocol !== 'https:' && base.protocol !== 'http:')
    throw new OddsfilesClientError('bad-url', `the URL must be https:// (or http://), not "${base.href}"`);
  if (!base.pathname.endsWith('/')) base.pathname += '/';
  return base;
}

export function createClient(options: ClientOptions): OddsfilesClient {
  const base = parseBaseUrl(options.url);
  if (!options.key) throw new OddsfilesClientError('unauthorized', 'no API key given');
  const conflate = options.conflateMs;
  if (conflate !== undefined && (!Number.isInteger(conflate) || conflate < 0 || conflate > 60_000)) {
    throw new OddsfilesClientError('protocol', 'conflateMs is an integer from 0 to 60000');
  }
  const controller = new AbortController();
  const onNotice = options.onNotice ?? (() => undefined);
  const http = createHttp({
    base,
    key: options.key,
    fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
    signal: controller.signal,
    onNotice,
    firstContactAttempts: options.firstContactAttempts ?? 3,
    maxBackoffMs: options.maxBackoffMs ?? 30_000,
  });
  const maxFileBytes = options.maxFileBytes ?? MAX_FILE_BYTES;
  const fetcher = createVersionFetcher(http, maxFileBytes);
  const files = new Map<string, FileVersion>();
  for (const f of options.files ?? []) files.set(f.filename, f);
  let position = options.position;
  let running = false;
  const relistMs = options.relistMs ?? 300_000;
  const idleMs = options.idleMs ?? 45_000;

  const lag = (v: FileVersion): Lag => {
    const now = Date.now();
    return { generated: now - Date.parse(v.generatedAt), published: now - Date.parse(v.publishedAt) };
  };
  const older = (generatedAt: string, than: FileVersion) => Date.parse(generatedAt) < Date.parse(than.generatedAt);

  /** Bring `filename` to the announced version (or newer); the change to hand on, if any. */
  async function update(filename: string, announced: Announced, at: number): Promise<Change | undefined> {
    const held = files.get(filename);
    if (held && (held.etag === announced.etag || older(announced.generatedAt, held))) return undefined;
    const got = await fetcher.fetch(filename, held, announced);
    if (got.kind === 'held') return undefined;
    if (got.kind === 'gone') {
      if (!held) return undefined;
      files.delete(filename);
      return { type: 'remove', filename, previousEtag: held.etag, position: at, reason: 'gone' };
    }
    const v = got.version;
    // Another server behind the same address may lag: never go back.
    if (held && (held.etag === v.etag || older(v.generatedAt, held))) return undefined;
    files.set(filename, v);
    return {
      type: 'update',
      filename,
      etag: v.etag,
      previousEtag: held?.etag ?? null,
      generatedAt: v.generatedAt,
      publishedAt: v.publishedAt,
      position: at,
      file: v,
      via: got.via,
      wireBytes: got.wireBytes,
      lagMs: lag(v),
    };
  }

  /**
   * The catalog against what is held: files no longer listed are removed; `full`: every listed
   * file brought to its version and the position moved to the catalog's; else only files not
   * held are fetched (the stream brings the changes of the others).
   */
  async function* relist(full: boolean): AsyncGenerator<Change> {
    const res = await http.get('v1/catalog', { accept: 'application/json' }, 'the catalog');
    if (res.status === 403) throw new OddsfilesClientError('forbidden', `the key has no access to this service (403): ${await problemDetail(res)}`, 403);
    if (res.status === 404) throw new OddsfilesClientError('bad-url', `${base.href} is not an oddsfiles service (GET v1/catalog: 404)`, 404);
    if (!res.ok) throw new OddsfilesClientError('protocol', `GET v1/catalog answered ${res.status}: ${await problemDetail(res)}`, res.status);
    const body = await readBounded(res, maxFileBytes, 'GET v1/catalog');
    let catalog: CatalogJson;
    try {
      catalog = JSON.parse(decoder.decode(body)) as CatalogJson;
      if (!Number.isInteger(catalog.position) || !Array.isArray(catalog.files)) throw new Error('unexpected shape');
    } catch (err) {
      throw new OddsfilesClientError('bad-url', `${base.href} is not an oddsfiles service (GET v1/catalog: ${(err as Error).message})`);
    }
    const listed = new Set(catalog.files.map((f) => f.filename));
    for (const [name, held] of [...files]) {
      if (listed.has(name)) continue;
      files.delete(name);
      yield { type: 'remove', filename: name, previousEtag: held.etag, position: catalog.position, reason: 'not-listed' };
    }
    for (const f of catalog.files) {
      if (!full && files.has(f.filename)) continue;
      const c = await update(f.filename, { etag: f.etag, generatedAt: f.generated_at, publishedAt: f.published_at }, catalog.position);
      if (c) yield c;
    }
    if (full) position = catalog.position;
  }

  const streamPath = () => `v1/stream${conflate ? `?conflate=${conflate}` : ''}`;

  async function* follow(): AsyncGenerator<Change> {
    let full = position === undefined;
    let check = !full;
    let retryMs = 2000;
    let failures = 0;
    let reconnecting = false;
    for (;;) {
      if (full) {
        try {
          yield* relist(true);
        } catch (err) {
          // A listing cut off (a restart, a dropped connection) is tried again, as a stream is.
          if (err instanceof OddsfilesClientError || controller.signal.aborted) throw err;
          failures++;
          const waitMs = backoffMs(failures, retryMs, Math.max(30_000, retryMs));
          onNotice({ type: 'reconnect', reason: `listing failed: ${(err as Error).message}`, waitMs });
          reconnecting = true;
          await http.sleep(waitMs);
          continue;
        }
        full = false;
        check = false;
      }
      const res = await http.get(streamPath(), { accept: 'text/event-stream', 'last-event-id': String(position) }, 'the change stream');
      if (res.status === 410) {
        await res.body?.cancel();
        onNotice({ type: 'relist', reason: `position ${position} is no longer in the change log` });
        full = true;
        continue;
      }
      if (res.status === 403) throw new OddsfilesClientError('forbidden', `the key has no access to this service (403): ${await problemDetail(res)}`, 403);
      if (res.status === 404) throw new OddsfilesClientError('bad-url', `${base.href} is not an oddsfiles service (GET v1/stream: 404)`, 404);
      if (!res.ok || !res.body || !(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
        throw new OddsfilesClientError('protocol', `GET v1/stream answered ${res.status}: ${await problemDetail(res)}`, res.status);
      }
      if (reconnecting) onNotice({ type: 'reconnected', position });
      reconnecting = false;
      if (check) yield* relist(false);
      check = true;
      let lastList = Date.now();
      let reason = 'the stream ended';
      let delivered = false;
      try {
        for await (const item of readSse(res.body, idleMs)) {
          // A server's retry is honoured up to 5 minutes (a huge one would overflow the timer).
          if (item.kind === 'retry') retryMs = Math.min(item.ms, 300_000);
          else if (item.kind === 'event') {
            if (item.event === 'change') {
              const c = JSON.parse(item.data) as ChangeJson;
              const change = await update(c.filename, { etag: c.etag, generatedAt: c.generated_at, publishedAt: c.published_at }, c.position);
              delivered = true;
              // Moved before it is handed on: a reader that stores it after handling the change resumes after it.
              position = c.position;
              if (change) yield change;
            } else if (item.event === 'revoked') {
              throw new OddsfilesClientError('revoked', 'the API key was revoked', 401);
            } else if (item.event === 'reset') {
              onNotice({ type: 'relist', reason: 'the change log moved out of reach (reset)' });
              full = true;
              reason = 'reset';
              break;
            } else if (item.event === 'dropped') {
              reason = 'the server dropped the stream (read too slowly)';
              break;
            }
          }
          if (Date.now() - lastList >= relistMs) {
            lastList = Date.now();
            yield* relist(false);
          }
        }
      } catch (err) {
        if (err instanceof OddsfilesClientError || controller.signal.aborted) throw err;
        reason = (err as Error).message;
      }
      if (full) continue;
      failures = delivered ? 0 : failures + 1;
      const waitMs = backoffMs(failures, retryMs, Math.max(30_000, retryMs));
      onNotice({ type: 'reconnect', reason, waitMs });
      reconnecting = true;
      await http.sleep(waitMs);
    }
  }

  return {
    files,
    get position() {
      return position;
    },
    async *changes({ follow: keepFollowing = true } = {}) {
      if (running) throw new Error('changes() is already being iterated');
      running = true;
      try {
        if (keepFollowing) yield* follow();
        else yield* relist(true);
      } catch (err) {
        if (controller.signal.aborted && !(err instanceof OddsfilesClientError)) return;
        throw err;
      } finally {
        running = false;
      }
    },
    close: () => controller.abort(new Error('closed')),
  };
}
