/** The pieces of the OpenAPI description that every /v1 operation shares: the problem schema, rate-limit headers, common statuses. */

const PROBLEM_REF = { $ref: 'Problem#' };

export const PROBLEM_SCHEMA = {
  $id: 'Problem',
  type: 'object',
  description: 'An error (RFC 9457 problem details). Switch on `status` or `type`; `detail` is for people.',
  required: ['type', 'title', 'status', 'detail'],
  properties: {
    type: { type: 'string', format: 'uri', description: 'Stable problem type, e.g. https://oddsfiles.dev/problems/rate-limited' },
    title: { type: 'string' },
    status: { type: 'integer', minimum: 400, maximum: 599 },
    detail: { type: 'string' },
  },
} as const;

export const RATE_HEADERS = {
  'RateLimit-Limit': { type: 'integer', description: 'Requests your plan allows per window. Sent when your plan has a rate.' },
  'RateLimit-Remaining': { type: 'integer', description: 'Requests left in the current window.' },
  'RateLimit-Reset': { type: 'integer', description: 'Seconds until the current window ends.' },
  'RateLimit-Policy': {
    type: 'string',
    description: 'The quota policy (draft-ietf-httpapi-ratelimit-headers): your plan, its quota q and window w in seconds, e.g. `"pro";q=600;w=60`.',
  },
  RateLimit: { type: 'string', description: 'The quota left under the policy (same draft): r requests for t seconds, e.g. `"pro";r=599;t=42`.' },
} as const;

export const RETRY_AFTER = { type: 'integer', description: 'Seconds to wait before retrying.' } as const;

export const VARY = { type: 'string', description: '`Accept-Encoding, A-IM`' } as const;

export const problem = (description: string, headers: Record<string, unknown> = {}) => ({
  description,
  headers,
  content: { 'application/problem+json': { schema: PROBLEM_REF } },
});

/**
 * What any other method than GET and HEAD gets on a /v1 path: refused before its body is read and
 * before the key is looked at. Listed with GET and HEAD, as the methods themselves are not operations.
 */
export const METHOD_NOT_ALLOWED = problem(
  'Not an answer to GET or HEAD: any other method on this path (POST, PUT, DELETE...) gets 405, whatever its body and its key.',
  {
    Allow: { type: 'string', description: 'The methods of this path: `GET, HEAD`.' },
  },
);

/** Statuses every /v1 operation may answer with besides its own. */
export const COMMON_PROBLEMS = {
  400: problem('Malformed request (e.g. bad percent-encoding in the URL).'),
  401: problem('No X-API-Key, an unknown or revoked key, or a wrong marketplace proxy secret.', {
    'WWW-Authenticate': { type: 'string', description: 'ApiKey header="X-API-Key"' },
  }),
  429: problem("Over your plan's rate (RateLimit headers say which), or too many failed authentications from your address.", {
    ...RATE_HEADERS,
    'Retry-After': RETRY_AFTER,
  }),
  503: problem('Starting up, a file being loaded, or overloaded: retry after Retry-After seconds.', { 'Retry-After': RETRY_AFTER }),
  405: METHOD_NOT_ALLOWED,
};
