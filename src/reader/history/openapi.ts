/**
 * The OpenAPI description of the history endpoints (documentation only: nothing is validated per
 * request; the parameters are added to the document by its transform, HISTORY_PARAMS).
 */
import { COMMON_PROBLEMS, problem, RATE_HEADERS, RETRY_AFTER, VARY } from '../openapi-parts.js';

export const HISTORY_LIST_PATH = '/v1/history/:filename';
export const HISTORY_VERSION_PATH = '/v1/history/:filename/:etag';

const VERSION = {
  type: 'object',
  required: ['etag', 'sha256', 'size', 'generated_at', 'published_at'],
  properties: {
    etag: { type: 'string', description: "The version's ETag (identity coding), as GET /v1/data gave it: fetch its bytes at /v1/history/{filename}/{etag}." },
    sha256: { type: 'string', description: 'SHA-256 of the published bytes.' },
    size: { type: 'integer', description: 'Bytes.' },
    generated_at: { type: 'string', format: 'date-time' },
    published_at: { type: 'string', format: 'date-time', description: 'When it became the current version.' },
  },
} as const;

const FORBIDDEN = problem(
  "`history_forbidden`: the key's plan has no history, or the version, `at` or `before` is older than the plan's history reaches; `forbidden`: the key may not read this file.",
  RATE_HEADERS,
);

/** History is read from Redis: its 503s include Redis not answering (src/reader/redis-reads.ts). */
const UNAVAILABLE = problem(
  'Starting up or overloaded, or Redis (which keeps the history) not answering: answered within a few seconds. Current files and their data are still served. Retry after Retry-After seconds.',
  { 'Retry-After': RETRY_AFTER },
);

export const HISTORY_LIST_SCHEMA = {
  operationId: 'listHistory',
  summary: "A file's older versions, newest first, or the one current at a moment",
  description:
    'Versions kept (the service keeps each for a retention), within how far back your plan reaches. Page with `next`; `at` gives the version that was current at that moment.',
  tags: ['history'],
  response: {
    200: {
      description: 'Without `at`: `versions` (newest first) and `next` (pass it as `before` for the next page; null at the end). With `at`: `version`.',
      headers: RATE_HEADERS,
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['filename'],
            properties: { filename: { type: 'string' }, versions: { type: 'array', items: VERSION }, next: { type: ['string', 'null'] }, version: VERSION },
          },
        },
      },
    },
    403: FORBIDDEN,
    404: problem('No file is published under this name (as GET /v1/data answers), or no version kept at or before `at`.', RATE_HEADERS),
    ...COMMON_PROBLEMS,
    503: UNAVAILABLE,
  },
};

export const HISTORY_VERSION_SCHEMA = {
  operationId: 'getHistoryVersion',
  summary: "One version's exact bytes",
  description: 'Immutable: cache it for good. gzip and br as Accept-Encoding asks, as for current files.',
  tags: ['history'],
  response: {
    200: {
      description: 'The bytes published then.',
      headers: {
        ...RATE_HEADERS,
        ETag: { type: 'string' },
        'Cache-Control': { type: 'string', description: '`private, max-age=31536000, immutable`' },
        'Content-Encoding': { type: 'string', description: '`gzip` or `br` when compressed' },
        Vary: VARY,
      },
      content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } },
    },
    304: { description: 'If-None-Match matched: your copy is this version.' },
    403: FORBIDDEN,
    404: problem(
      'No file is published under this name (as GET /v1/data answers), or no version of it with this ETag is kept (or the store no longer has it).',
      RATE_HEADERS,
    ),
    ...COMMON_PROBLEMS,
    503: UNAVAILABLE,
  },
};

const FILENAME = { type: 'string', description: 'The exact filename, as listed by listFiles.' };

/** Parameters of the history operations, added by the document's transform. */
export const HISTORY_PARAMS: Readonly<Record<string, object>> = {
  [HISTORY_LIST_PATH]: {
    params: { type: 'object', required: ['filename'], properties: { filename: FILENAME } },
    querystring: {
      type: 'object',
      properties: {
        at: { type: 'string', format: 'date-time', description: 'The version current at this moment (ISO 8601 with a zone).' },
        before: { type: 'string', description: 'Versions published before this ISO time, or the `next` of a previous page.' },
        limit: { type: 'integer', minimum: 1, maximum: 1000, description: 'Most versions in one answer (default 100).' },
      },
    },
  },
  [HISTORY_VERSION_PATH]: {
    params: {
      type: 'object',
      required: ['filename', 'etag'],
      properties: { filename: FILENAME, etag: { type: 'string', description: "The version's ETag: its 32 hex digits, quoted or not." } },
    },
  },
};
