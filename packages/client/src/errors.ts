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

/** The `detail` (else `title`) of a problem+json answer, or the start of whatever the body was. */
export async function problemDetail(res: Response): Promise<string> {
  const text = await res.text().catch(() => '');
  try {
    const p = JSON.parse(text) as { detail?: unknown; title?: unknown };
    if (typeof p.detail === 'string') return p.detail;
    if (typeof p.title === 'string') return p.title;
  } catch {
    // not JSON
  }
  return text.slice(0, 200) || `HTTP ${res.status}`;
}
