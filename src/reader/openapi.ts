/**
 * The OpenAPI 3.1 description of the API, served at GET /v1/openapi.json. @fastify/swagger builds
 * it from the route schemas below (operation ids as in the spec: listFiles, getOddsData), with the
 * X-API-Key security scheme, every status with the problem schema and the rate-limit headers.
 *
 * The response schemas are documentation: the handlers send Buffers (the published bytes, the
 * precomputed file list, problem bodies), which Fastify never serializes, so the schemas cost
 * nothing on the request path. No request schema is attached either (no validation per request):
 * the data route is the wildcard /v1/data/*, presented as /v1/data/{filename} by the transform.
 * Routes outside /v1 (health, metrics, admin) are left out of the document.
 *
 * HEAD is documented beside each GET (operation id with `Head` appended: the same answers without
 * a body). Other methods have no operation (no code generator should offer them): the 405 they get,
 * with its Allow header, is listed among the responses of each path's GET and HEAD.
 */
import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CHANGE_QUERIES } from './changes/openapi.js';
import { HISTORY_PARAMS } from './history/openapi.js';
import { COMMON_PROBLEMS, METHOD_NOT_ALLOWED, PROBLEM_SCHEMA, problem, RATE_HEADERS, RETRY_AFTER, VARY } from './openapi-parts.js';
import { PUT_DOCUMENTED_REQUEST } from './publishing/publish-openapi.js';

export const OPENAPI_PATH = '/v1/openapi.json';
export const API_VERSION = '1.0.0';

const CONDITIONAL_HEADERS = {
  ETag: { type: 'string', description: 'Strong validator of this representation (each content-coding has its own).' },
  'Cache-Control': { type: 'string', description: '`private, no-cache`' },
} as const;

export const FILES_ROUTE_SCHEMA = {
  operationId: 'listFiles',
  summary: 'List the filenames your key may download',
  description: 'The published filenames your allow-list matches, sorted. Request only these names.',
  tags: ['odds'],
  response: {
    200: {
      description: 'The file list.',
      headers: { ...RATE_HEADERS, ...CONDITIONAL_HEADERS },
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['files'],
            additionalProperties: false,
            properties: { files: { type: 'array', items: { type: 'string' }, description: 'Each a valid `filename` for getOddsData.' } },
          },
        },
      },
    },
    304: { description: 'Not modified: If-None-Match matched the current ETag.', headers: { ...RATE_HEADERS, ...CONDITIONAL_HEADERS }, type: 'null' },
    ...COMMON_PROBLEMS,
    403: problem('Forbidden: your marketplace subscription plan gives no access to this API.', RATE_HEADERS),
  },
} as const;

/** 226 IM Used: a patch from the version named in If-None-Match to the current one (delta.ts). */
const DELTA_RESPONSE = {
  description:
    'IM Used: a patch that turns the version you named in If-None-Match into the current one, as a JSON value (RFC 6902 JSON Patch or RFC 7396 JSON Merge Patch, as the IM header says). Apply it, then check Json-Canonical-Sha256; on a mismatch GET the whole file.',
  headers: {
    ...RATE_HEADERS,
    ETag: { type: 'string', description: 'The current version (its identity form): send it next time.' },
    IM: { type: 'string', enum: ['json-patch', 'merge-patch'] },
    'Delta-Base': { type: 'string', description: 'The ETag of the version the patch applies to.' },
    'Json-Canonical-Sha256': {
      type: 'string',
      description: 'SHA-256 (hex) of the current version in canonical JSON (RFC 8785), on 226 and on 200 answers to requests with A-IM.',
    },
    'Last-Modified': { type: 'string' },
    'Generated-At': { type: 'string', format: 'date-time' },
    Vary: { type: 'string', description: '`Accept-Encoding, A-IM, If-None-Match`' },
    'Content-Encoding': { type: 'string', enum: ['br', 'gzip'], description: 'When you accepted a coding.' },
  },
  content: {
    'application/json-patch+json': { schema: { type: 'array', items: { type: 'object', additionalProperties: true } } },
    'application/merge-patch+json': { schema: { type: 'object', additionalProperties: true } },
  },
} as const;

export const DATA_ROUTE_SCHEMA = {
  operationId: 'getOddsData',
  summary: 'Download one odds file',
  description:
    'The JSON document exactly as the bookmaker published it. Send Accept-Encoding: br or gzip for a compressed body, and If-None-Match with the ETag you hold to get 304 until a new version is published. Deltas (RFC 3229): with If-None-Match naming a version you hold (one of the last 8) and `A-IM: json-patch` and/or `merge-patch`, the answer is 226 with a patch when it is smaller than the whole answer (one under 1/64 of the file is sent without comparing) and ready within a second (files over deltas.max_bytes get none); the JSON value is rebuilt exactly, key order and whitespace are not. Checks run in the order 401, 429, 404, 403.',
  tags: ['odds'],
  response: {
    200: {
      description: 'The odds document (its shape varies by feed; read it leniently).',
      headers: {
        ...RATE_HEADERS,
        ...CONDITIONAL_HEADERS,
        'Last-Modified': { type: 'string', description: 'When this version was published.' },
        'Generated-At': {
          type: 'string',
          format: 'date-time',
          description: "The document's `generated_at` (ISO 8601 UTC): how fresh it is, without parsing it.",
        },
        Vary: VARY,
        'Content-Encoding': { type: 'string', enum: ['br', 'gzip'], description: 'When you accepted a coding.' },
      },
      content: {
        'application/json': {
          schema: {
            type: 'object',
            additionalProperties: true,
            properties: {
              bookmaker: { type: 'string' },
              generated_at: { type: 'string', format: 'date-time' },
              sport: { type: 'string' },
              events: { type: 'array', items: { type: 'object', additionalProperties: true } },
            },
          },
        },
      },
    },
    226: DELTA_RESPONSE,
    304: {
      description: 'Not modified: If-None-Match (or If-Modified-Since) says your copy is current.',
      headers: {
        ...RATE_HEADERS,
        ...CONDITIONAL_HEADERS,
        'Last-Modified': { type: 'string' },
        'Generated-At': { type: 'string', format: 'date-time' },
        Vary: VARY,
      },
      type: 'null',
    },
    ...COMMON_PROBLEMS,
    403: problem('The file is published but not on your allow-list (or your marketplace plan gives no access).', RATE_HEADERS),
    404: problem('No file is published under this name (also any name that is not a feed filename).', RATE_HEADERS),
  },
} as const;

export const OPENAPI_ROUTE_SCHEMA = {
  operationId: 'getOpenApi',
  summary: 'This description of the API (OpenAPI 3.1)',
  tags: ['meta'],
  security: [],
  response: {
    200: { description: 'The OpenAPI document.', content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } } },
    405: METHOD_NOT_ALLOWED,
    503: problem('Overloaded: retry after Retry-After seconds.', { 'Retry-After': RETRY_AFTER }),
  },
} as const;

const FILENAME_PARAMS = {
  type: 'object',
  required: ['filename'],
  properties: {
    filename: {
      type: 'string',
      description: 'The exact filename, as listed by listFiles (e.g. site_live_northwind_soccer.json).',
      examples: ['site_pregame_northwind_soccer.json'],
    },
  },
} as const;

/** Register @fastify/swagger (before any route) and the shared Problem schema. */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  app.addSchema(PROBLEM_SCHEMA);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Odds File Service',
        version: API_VERSION,
        description:
          'Bookmaker odds, live and pre-match, as JSON files: list the filenames your key may download, then download by exact filename. Every error is application/problem+json.',
      },
      tags: [
        { name: 'odds', description: 'Listing and downloading the files.' },
        { name: 'publishing', description: 'Publishing files with a publisher key (PUT), when the service takes them.' },
        { name: 'changes', description: 'Learning of new versions as they are published: a catalog with a position, a long-poll, and server-sent events.' },
        { name: 'history', description: 'Older versions of a file, kept for a while: listed, as of a moment, and their bytes (plans with history).' },
        { name: 'meta', description: 'About the API itself.' },
      ],
      components: {
        securitySchemes: {
          ApiKeyAuth: {
            type: 'apiKey',
            in: 'header',
            name: 'X-API-Key',
            description: 'Your API key (odf_…). Marketplace traffic is authenticated by the marketplace instead.',
          },
        },
      },
      security: [{ ApiKeyAuth: [] }],
    },
    // HEAD beside each GET (Fastify adds the HEAD routes; headOperation below describes them).
    exposeHeadRoutes: true,
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
    transform: ({ schema, url, route }) => {
      if (!url.startsWith('/v1/')) return { schema: { ...(schema ?? {}), hide: true }, url };
      let out = (schema ?? {}) as Record<string, unknown>;
      if (route.method === 'HEAD') out = headOperation(out);
      if (route.method === 'PUT') out = { ...out, ...PUT_DOCUMENTED_REQUEST };
      if (url === '/v1/data/*') return { schema: { ...out, params: FILENAME_PARAMS }, url: '/v1/data/:filename' };
      const history = HISTORY_PARAMS[url];
      if (history) return { schema: { ...out, ...history }, url };
      const query = CHANGE_QUERIES[url];
      if (query) return { schema: { ...out, querystring: query }, url };
      return { schema: out, url };
    },
  });
}

/**
 * The HEAD twin of a GET's schema: its own operation id (`listFilesHead`: @fastify/swagger would
 * make it `listFiles-head`), and every response as the GET's without a body (headers only).
 */
function headOperation(schema: Record<string, unknown>): Record<string, unknown> {
  const id = String(schema.operationId ?? '').replace(/-head$/, '');
  const responses: Record<string, unknown> = {};
  for (const [status, response] of Object.entries((schema.response ?? {}) as Record<string, Record<string, unknown>>)) {
    const { content: _content, ...rest } = response;
    responses[status] = { ...rest, type: 'null' };
  }
  return {
    ...schema,
    ...(id ? { operationId: `${id}Head` } : {}),
    summary: `${String(schema.summary ?? '')} (headers only)`.trim(),
    description: 'As GET, with the same headers and statuses, and no body.',
    response: responses,
  };
}

/** GET /v1/openapi.json: the document, built once (after the routes are known) and kept as bytes. */
export function openApiHandler(app: FastifyInstance) {
  let body: Buffer | undefined;
  return function getOpenApi(_request: FastifyRequest, reply: FastifyReply): FastifyReply {
    body ??= Buffer.from(JSON.stringify(app.swagger()));
    return reply.header('content-type', 'application/json').header('cache-control', 'public, max-age=300').send(body);
  };
}
