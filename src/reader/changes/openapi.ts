/**
 * The OpenAPI description of the change endpoints (documentation only: nothing is validated per
 * request). The query parameters are added to the document by its transform (CHANGE_QUERIES), not
 * to the routes: Fastify would validate them before the key is checked, with its own messages.
 */
import { COMMON_PROBLEMS, problem, RATE_HEADERS, RETRY_AFTER } from '../openapi-parts.js';

const CHANGE = {
  type: 'object',
  required: ['position', 'filename', 'etag', 'previous_etag', 'sha256', 'size', 'generated_at', 'published_at'],
  properties: {
    position: { type: 'integer', minimum: 1, description: 'Where this change is in the change log: resume after it with `since` or Last-Event-ID.' },
    filename: { type: 'string' },
    etag: { type: 'string', description: 'The ETag a GET of the file now answers with (identity coding).' },
    previous_etag: { type: ['string', 'null'], description: 'The ETag of the version it replaced; null for a first publication.' },
    sha256: { type: 'string', description: 'SHA-256 of the published bytes.' },
    size: { type: 'integer', description: 'Bytes.' },
    generated_at: { type: 'string', format: 'date-time' },
    published_at: { type: 'string', format: 'date-time' },
  },
} as const;

const GONE = problem(
  "The position is older than the change log keeps, or ahead of the newest position (e.g. the log was lost with Redis's data): list again with getCatalog and continue from its position. The body adds `oldest` (the oldest position kept) and `position` (the current one).",
  RATE_HEADERS,
);

/** A position older than the reader's recent changes is read from the log in Redis: its 503s include Redis not answering (src/reader/redis-reads.ts). */
const UNAVAILABLE = problem(
  'Starting up or overloaded, or Redis (which keeps the change log) not answering when a position older than the latest 10,000 changes is asked for: answered within a few seconds. Files, their data and recent changes are still served. Retry after Retry-After seconds.',
  { 'Retry-After': RETRY_AFTER },
);

const SINCE = { type: 'string', pattern: '^[0-9]+$', description: 'The last position you have seen (from getCatalog, a change, or `next`). Default: now.' };

export const CATALOG_ROUTE_SCHEMA = {
  operationId: 'getCatalog',
  summary: 'Your files with their versions, and the change position they are current at',
  description: 'Start here: keep `position`, then follow the changes after it (listChanges or streamChanges).',
  tags: ['changes'],
  response: {
    200: {
      description: 'Your files, sorted by name.',
      headers: RATE_HEADERS,
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['position', 'files'],
            properties: {
              position: { type: 'integer', minimum: 0 },
              files: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['filename', 'etag', 'sha256', 'size', 'generated_at', 'published_at'],
                  properties: {
                    filename: { type: 'string' },
                    etag: { type: 'string' },
                    sha256: { type: 'string' },
                    size: { type: 'integer' },
                    generated_at: { type: 'string', format: 'date-time' },
                    published_at: { type: 'string', format: 'date-time' },
                  },
                },
              },
            },
          },
        },
      },
    },
    ...COMMON_PROBLEMS,
    403: problem('Forbidden: your marketplace subscription plan gives no access to this API.', RATE_HEADERS),
  },
} as const;

export const CHANGES_ROUTE_SCHEMA = {
  operationId: 'listChanges',
  summary: 'The changes to your files after a position (long-poll with `wait`)',
  description:
    'Oldest first, at most `limit`. With `wait`, the request is held until there is a change to your files or the wait ends; an empty answer still moves `next` past what it looked at. A held request counts once against your rate.',
  tags: ['changes'],
  response: {
    200: {
      description: 'The changes, and the position to ask for next.',
      headers: RATE_HEADERS,
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['changes', 'next'],
            properties: { changes: { type: 'array', items: CHANGE }, next: { type: 'integer', minimum: 0 } },
          },
        },
      },
    },
    ...COMMON_PROBLEMS,
    403: problem('Forbidden: your marketplace subscription plan gives no access to this API.', RATE_HEADERS),
    410: GONE,
    503: UNAVAILABLE,
  },
} as const;

export const STREAM_ROUTE_SCHEMA = {
  operationId: 'streamChanges',
  summary: 'The changes to your files, pushed as server-sent events',
  description:
    'text/event-stream. Each change is an event `change` with `id:` its position and the change as JSON `data:`; resume with Last-Event-ID (browsers and EventSource clients send it themselves) or `?since=`. A comment line every ~15 s keeps the connection open. The server may end a stream with an event `dropped` (you read too slowly), `revoked` (your key was revoked) or `reset` (the log moved out of reach: list again with getCatalog). Counts once against your rate when opened. With `conflate`, at most one write of changes per that many milliseconds, the latest change of each file.',
  tags: ['changes'],
  response: {
    200: { description: 'The event stream.', content: { 'text/event-stream': { schema: { type: 'string' } } } },
    ...COMMON_PROBLEMS,
    403: problem('Forbidden: your marketplace subscription plan gives no access to this API.', RATE_HEADERS),
    410: GONE,
    503: UNAVAILABLE,
    429: problem("Over your plan's rate, or your key already has its plan's number of streams open.", {
      ...RATE_HEADERS,
      'Retry-After': RETRY_AFTER,
    }),
  },
} as const;

/** The query parameters of each change endpoint, by path, for the OpenAPI document. */
export const CHANGE_QUERIES: Readonly<Record<string, object>> = {
  '/v1/changes': {
    type: 'object',
    properties: {
      since: SINCE,
      wait: { type: 'number', minimum: 0, maximum: 60, description: 'Seconds to hold the request when there is nothing yet (default 0).' },
      limit: { type: 'integer', minimum: 1, maximum: 1000, description: 'Most changes in one answer (default 100).' },
    },
  },
  '/v1/stream': {
    type: 'object',
    properties: {
      since: { ...SINCE, description: 'Where to resume when you send no Last-Event-ID (default: now).' },
      conflate: {
        type: 'integer',
        minimum: 0,
        maximum: 60000,
        description:
          'At most one write of changes per this many milliseconds, holding only the latest change of each file (default 0: each change as it comes; your plan may set a minimum, which a smaller value is raised to). Positions still increase and Last-Event-ID resumes as without it: a change left out was replaced by a later one of the same file that was sent.',
      },
    },
  },
};
