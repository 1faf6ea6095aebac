/**
 * One request to the service with the client's policy: the key in `X-API-Key` (never in the URL);
 * `429` and `503` waited out for their `Retry-After`, other 5xx and network failures retried,
 * each with an exponential backoff and jitter, so a hundred clients refused at once do not come
 * back at once; `401` is fatal. Every other answer goes to the caller, which knows what a 403,
 * 404 or 410 means for what it asked.
 */
import { readUpTo } from './body.js';
import { OddsfilesClientError, problemDetail } from './errors.js';

export type Notice =
  | { readonly type: 'retry'; readonly what: string; readonly status?: number; readonly error?: string; readonly waitMs: number; readonly attempt: number }
  | { readonly type: 'reconnect'; readonly reason: string; readonly waitMs: number }
  /** The change stream is open again after a `reconnect`. */
  | { readonly type: 'reconnected'; readonly position: number | undefined }
  | { readonly type: 'relist'; readonly reason: string };

export interface Http {
  /** GET `path` (with its query) until an answer the caller must judge. */
  get(path: string, headers: Record<string, string>, what: string): Promise<Response>;
  readonly base: URL;
  sleep(ms: number): Promise<void>;
}

export interface HttpOptions {
  readonly base: URL;
  readonly key: string;
  readonly fetch: typeof fetch;
  readonly signal: AbortSignal;
  readonly onNotice: (n: Notice) => void;
  /** Network failures tolerated before the service was ever reached (then: `unreachable`). */
  readonly firstContactAttempts: number;
  readonly maxBackoffMs: number;
}

/** Seconds (or an HTTP date) of a Retry-After header, in ms; undefined when absent or malformed. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The wait before attempt `attempt` (0-based): at least what the server asked, growing, with up to +30 % jitter. */
export function backoffMs(attempt: number, askedMs: number | undefined, maxMs: number): number {
  const grown = Math.min(maxMs, 250 * 2 ** Math.min(attempt, 20));
  const base = Math.max(askedMs ?? 0, grown);
  return Math.round(base * (1 + Math.random() * 0.3));
}

export function createHttp(opts: HttpOptions): Http {
  const { base, signal } = opts;
  let reached = false;
  const sleep = (ms: number) =>
    new Promise<void>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason as Error);
      const done = () => {
        clearTimeout(t);
        signal.removeEventListener('abort', done);
        if (signal.aborted) reject(signal.reason as Error);
        else resolve();
      };
      const t = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
    });

  return {
    base,
    sleep,
    async get(path, headers, what) {
      for (let attempt = 0; ; attempt++) {
        let res: Response;
        try {
          // Redirects are not followed: fetch would send the key on to wherever they point.
          res = await opts.fetch(new URL(path, base), { headers: { 'x-api-key': opts.key, ...headers }, signal, redirect: 'manual' });
        } catch (err) {
          if (signal.aborted) throw signal.reason as Error;
          const message = (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;
          if (!reached && attempt + 1 >= opts.firstContactAttempts) {
            throw new OddsfilesClientError('unreachable', `cannot reach ${base.origin}: ${message}`);
          }
          const waitMs = backoffMs(attempt, undefined, opts.maxBackoffMs);
          opts.onNotice({ type: 'retry', what, error: message, waitMs, attempt: attempt + 1 });
          await sleep(waitMs);
          continue;
        }
        reached = true;
        if (res.status >= 300 && res.status < 400 && res.status !== 304) {
          await res.body?.cancel();
          const to = res.headers.get('location');
          throw new OddsfilesClientError(
            'bad-url',
            `${base.origin} redirects ${path} to ${to ?? '(nowhere)'}: give the service's own address (the key is not sent on)`,
            res.status,
          );
        }
        if (res.status === 401) throw new OddsfilesClientError('unauthorized', `the key was refused (401): ${await problemDetail(res)}`, 401);
        if (res.status === 429 || res.status >= 500) {
          const asked = retryAfterMs(res.headers.get('retry-after'));
          const detail = await problemDetail(res);
          const waitMs = backoffMs(attempt, asked, Math.max(opts.maxBackoffMs, asked ?? 0));
          opts.onNotice({ type: 'retry', what, status: res.status, error: detail, waitMs, attempt: attempt + 1 });
          await sleep(waitMs);
          continue;
        }
        return res;
      }
    },
  };
}

/** A body read whole, up to `maxBytes` (decoded); past that it is refused (body.ts). */
export async function readBounded(res: Response, maxBytes: number, what: string): Promise<Uint8Array> {
  const { bytes, complete } = await readUpTo(res, maxBytes);
  if (!complete) throw new OddsfilesClientError('protocol', `${what}: the answer is larger than ${maxBytes} bytes (the client's maxFileBytes)`);
  return bytes;
}
