/**
 * The OpenAPI description of PUT /v1/data/{filename} (publish-route.ts). The request body, the
 * query and the Content-Encoding header are documentation only (PUT_DOCUMENTED_REQUEST, added by
 * openapi.ts's transform): the route validates nothing through Fastify, it streams the body.
 */
import { COMMON_PROBLEMS, problem, RATE_HEADERS, RETRY_AFTER } from '../openapi-parts.js';

const OUTCOME_BODY = {
  type: 'object',
  required: ['outcome', 'filename', 'etag', 'generated_at'],
  properties: {
    outcome: { type: 'string', enum: ['published', 'unchanged'] },
    filename: { type: 'string' },
    etag: { type: 'string', description: 'The ETag a GET of this filename now answers with (identity coding).' },
    generated_at: {
      type: 'string',
      format: 'date-time',
      description: 'The published version’s generated_at (stamped with the time of receipt when the document had none).',
    },
  },
} as const;

const DRY_RUN_BODY = {
  type: 'object',
  required: ['outcome', 'dry_run', 'would', 'filename', 'generated_at'],
  properties: {
    outcome: { type: 'string', enum: ['valid'] },
    dry_run: { type: 'boolean', enum: [true] },
    would: { type: 'string', enum: ['published', 'unchanged', 'superseded'] },
    filename: { type: 'string' },
    generated_at: { type: 'string', format: 'date-time' },
    published_generated_at: { type: 'string', format: 'date-time' },
    published_etag: { type: 'string' },
  },
} as const;

const ETAG = { type: 'string', description: 'As a GET of the file now answers.' } as const;

export const PUT_ROUTE_SCHEMA = {
  operationId: 'putOddsData',
  summary: 'Publish one odds file (publisher keys)',
  description:
    'The document as the body (Content-Encoding: gzip accepted), through the same pipeline as a file dropped in the inbox: the same validation, generated_at stamping and newest-wins. The answer waits until the outcome is settled. Sending the same bytes again is safe (200 unchanged). Checks run in the order 401, 403 (not a publisher key), 429, 400, 403 (filename not in its publish patterns), 415, 413, 429 (too many uploads of this key at once), 503.',
  tags: ['publishing'],
  response: {
    200: {
      description: 'Unchanged: these bytes are the published version already (or, with ?dry_run=1, the document is valid: `would` says what a PUT would do).',
      headers: { ...RATE_HEADERS, ETag: ETAG },
      content: { 'application/json': { schema: { oneOf: [OUTCOME_BODY, DRY_RUN_BODY] } } },
    },
    201: {
      description: 'Published: this is now the version GET serves.',
      headers: { ...RATE_HEADERS, ETag: ETAG, Location: { type: 'string', description: 'The download URL.' } },
      content: { 'application/json': { schema: OUTCOME_BODY } },
    },
    ...COMMON_PROBLEMS,
    400: problem('Not a feed filename, or a body that is not valid gzip.', RATE_HEADERS),
    403: problem('The key may not publish, or not this filename.', RATE_HEADERS),
    408: problem('The body did not arrive within publish.upload_timeout.', RATE_HEADERS),
    409: problem('Superseded: a version with a later generated_at is published; `published_generated_at` names it. Nothing was published.', RATE_HEADERS),
    413: problem('The body (or its decompressed form) is larger than limits.max_file_bytes.', RATE_HEADERS),
    415: problem('A Content-Encoding other than gzip.', RATE_HEADERS),
    429: problem(
      "Over the key's publish rate (RateLimit headers say which), too many failed authentications from your address, or (too-many-uploads) the key's plan's `uploads` (publish.uploads_per_key) bodies already arriving.",
      { ...RATE_HEADERS, 'Retry-After': RETRY_AFTER },
    ),
    422: problem('Rejected: `reason` is the rejection code and `detail` says why, as in the rejection’s reason.json; `rejection_id` names it.', RATE_HEADERS),
    503: problem('Starting up, overloaded, too many uploads at once, or the store or Redis unavailable: retry after Retry-After seconds.', {
      ...RATE_HEADERS,
      'Retry-After': RETRY_AFTER,
    }),
    504: problem('Queued, but not settled within publish.settle_timeout: it will be settled, and sending the same bytes again is safe.', {
      ...RATE_HEADERS,
      'Retry-After': RETRY_AFTER,
    }),
  },
} as const;

/** What the route takes, for the document only (openapi.ts adds it to the PUT operation). */
export const PUT_DOCUMENTED_REQUEST = {
  body: {
    type: 'object',
    additionalProperties: true,
    description: 'The odds document, as a file of the drop folder would hold it.',
    properties: { generated_at: { type: 'string', format: 'date-time' }, bookmaker: { type: 'string' }, sport: { type: 'string' } },
  },
  querystring: {
    type: 'object',
    properties: { dry_run: { type: 'string', enum: ['1', 'true'], description: 'Validate and answer without publishing.' } },
  },
  headers: {
    type: 'object',
    properties: { 'content-encoding': { type: 'string', enum: ['gzip', 'identity'], description: 'gzip: the body is compressed.' } },
  },
} as const;
