import { readUpTo } from './body.js';

/**
 * What the client cannot go on from: the service refused the key, the URL is not an oddsfiles
 * service, or the answers do not make sense. Everything else (the network, 429, 503, a stream
 * that ends) is retried by the client itself and only reported through `onNotice`.
 */
export type FatalCode = 'bad-url' | 'unauthorized' | 'forbidden' | 'revoked' | 'unreachable' | 'protocol';

export class OddsfilesClientError extends Error {
  override readonly name = 'OddsfilesClientError';
  constructor(
    readonly code: FatalCode,
    message: string,
    /** The HTTP status that said so, when one did. */
    readonly status?: number,
  ) {
    super(message);
  }
}

/** How much of an error answer's body is read: a problem+json document is a few hundred bytes. */
const MAX_PROBLEM_BYTES = 64 * 1024;

/**
 * The `detail` (else `title`) of a problem+json answer, or the start of whatever the body was:
 * read up to MAX_PROBLEM_BYTES (a body that never ends is cut), at most 300 characters shown,
 * control characters replaced (a terminal must not take a server's text for commands).
 */
export async function problemDetail(res: Response): Promise<string> {
  // A body cut off by the network shows only the status.
  const text = new TextDecoder().decode((await readUpTo(res, MAX_PROBLEM_BYTES).catch(() => undefined))?.bytes ?? new Uint8Array(0));
  let shown = text;
  try {
    const p = JSON.parse(text) as { detail?: unknown; title?: unknown };
    if (typeof p.detail === 'string') shown = p.detail;
    else if (typeof p.title === 'string') shown = p.title;
  } catch {
    // not JSON
  }
  const clean = shown.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ').trim();
  return (clean.length > 300 ? `${clean.slice(0, 300)}…` : clean) || `HTTP ${res.status}`;
}
