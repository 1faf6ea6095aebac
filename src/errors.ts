/**
 * The one catalogue of errors. Every error the service raises on purpose carries a stable `code`
 * (never renamed: operators grep for them, clients switch on them). HTTP errors also carry the
 * status and the problem-type title used in `application/problem+json` bodies (RFC 9457).
 */

/** Why a drop was not published. These strings are part of the API: publishers and tools switch on them. */
export const REJECTION_REASONS = [
  'unknown_filename',
  'empty',
  'too_large',
  'invalid_json',
  'not_i_json',
  'not_an_object',
  'schema',
  'bookmaker_mismatch',
  'sport_mismatch',
  'bad_generated_at',
  'future_generated_at',
] as const;
export type RejectionReason = (typeof REJECTION_REASONS)[number];

/** Base class: every deliberate error has a stable code. */
export class OddsfilesError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A drop that breaks the publishing rules. Never retried. */
export class RejectionError extends OddsfilesError {
  readonly reason: RejectionReason;
  readonly detail: string;
  constructor(reason: RejectionReason, detail: string) {
    super(`rejected.${reason}`, `${reason}: ${detail}`);
    this.reason = reason;
    this.detail = detail;
  }
}

/** The configuration is unusable; start-up stops with this message. */
export class ConfigError extends OddsfilesError {
  readonly file: string | undefined;
  readonly path: string;
  constructor(file: string | undefined, path: string, problem: string) {
    super('config.invalid', `${file ?? 'environment'}: ${path || '(root)'}: ${problem}`);
    this.file = file;
    this.path = path;
  }
}

/** The store could not be read or written for a reason that may pass (retry with backoff). */
export class StoreUnavailableError extends OddsfilesError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('store.unavailable', message, options);
  }
}

/** The object asked for is not in the store: the only store error that may become a 404. */
export class StoreNotFoundError extends OddsfilesError {
  readonly key: string;
  constructor(key: string) {
    super('store.not_found', `no object at ${key}`);
    this.key = key;
  }
}

/** Redis is needed and not reachable. */
export class RedisUnavailableError extends OddsfilesError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('redis.unavailable', message, options);
  }
}

/** Bad command-line usage: exit code 2. */
export class UsageError extends OddsfilesError {
  constructor(message: string) {
    super('cli.usage', message);
  }
}

/** Something the operator asked for does not exist (a key, a rejected drop): exit code 1. */
export class NotFoundError extends OddsfilesError {
  constructor(what: string) {
    super('not_found', what);
  }
}

/**
 * `publish` or `rejected retry` would claim files in an INBOX_DIR that none of the running workers
 * watches (another machine, another DATA_DIR): refused before any file is moved, exit code 1. So
 * is `rejected list`, whose REJECTED_DIR would then be another one too.
 */
export class InboxMismatchError extends OddsfilesError {
  readonly inboxDir: string;
  constructor(inboxDir: string, workersWatch: readonly { host: string; inbox: string }[] = []) {
    const where = workersWatch.map((w) => `${w.inbox} on ${w.host}`).join(', ');
    super(
      'cli.inbox_mismatch',
      `this command's INBOX_DIR (${inboxDir}) is not the inbox the running workers watch${where ? ` (they watch ${where})` : ''}: run it with the service's environment (INBOX_DIR/DATA_DIR, REDIS_URL, REDIS_PREFIX) on a machine that shares the inbox`,
    );
    this.inboxDir = inboxDir;
  }
}

/** The problems a client can meet over HTTP, one entry per stable code. */
export const HTTP_PROBLEMS = {
  unauthorized: { status: 401, title: 'Missing or invalid API key' },
  forbidden: { status: 403, title: 'Not allowed for this key' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  rate_limited: { status: 429, title: 'Rate limit exceeded' },
  too_many_streams: { status: 429, title: 'Too many open streams for this key' },
  too_many_uploads: { status: 429, title: 'Too many uploads at once for this key' },
  position_gone: { status: 410, title: 'Position not in the change log' },
  bad_request: { status: 400, title: 'Bad request' },
  uri_too_long: { status: 414, title: 'URI too long' },
  headers_too_large: { status: 431, title: 'Request header fields too large' },
  unavailable: { status: 503, title: 'Service unavailable' },
  internal: { status: 500, title: 'Internal error' },
  request_timeout: { status: 408, title: 'Request timeout' },
  payload_too_large: { status: 413, title: 'Request body too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  // PUT /v1/data/{filename} (publishing over HTTPS): how the document was settled, when not published.
  superseded: { status: 409, title: 'A newer version is published' },
  rejected: { status: 422, title: 'Document rejected' },
  publish_pending: { status: 504, title: 'Publication not settled yet' },
  // GET /v1/history: the key's plan has no history, or the version or moment asked is older than it allows.
  history_forbidden: { status: 403, title: 'Beyond the history this key may read' },
  // The admin endpoints (/metrics, /admin/*: src/ops/admin-guard.ts): no API key is involved there.
  // After the general entries, so that a bare status (a framework error) maps to those.
  admin_unauthorized: { status: 401, title: 'Missing or invalid admin token' },
  admin_forbidden: { status: 403, title: 'Admin access only from loopback or with the admin token' },
  admin_cross_site: { status: 403, title: 'Cross-site requests may not change the admin endpoints' },
} as const;
export type HttpProblemCode = keyof typeof HTTP_PROBLEMS;

/** An error that the reader turns into a problem+json response. */
export class HttpProblem extends OddsfilesError {
  readonly status: number;
  readonly title: string;
  readonly detail: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Members of the problem body beyond type, title, status and detail (RFC 9457 extensions). */
  readonly extensions: Readonly<Record<string, unknown>> | undefined;
  constructor(code: HttpProblemCode, detail: string, headers: Record<string, string> = {}, extensions?: Record<string, unknown>) {
    super(`http.${code}`, detail);
    this.status = HTTP_PROBLEMS[code].status;
    this.title = HTTP_PROBLEMS[code].title;
    this.detail = detail;
    this.headers = headers;
    this.extensions = extensions;
  }
  /** The stable problem type URI: clients may switch on it. */
  get type(): string {
    return `https://oddsfiles.dev/problems/${this.code.slice('http.'.length).replaceAll('_', '-')}`;
  }
}

/** Exit codes of the command line: 0 success, 1 failure, 2 bad usage. */
export function exitCodeFor(err: unknown): number {
  return err instanceof UsageError ? 2 : 1;
}
