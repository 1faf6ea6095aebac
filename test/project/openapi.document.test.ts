/**
 * GET /v1/openapi.json: a valid OpenAPI 3.1 document (checked against the official schema by
 * @seriousme/openapi-schema-validator) that matches the live app: every /v1 route is documented,
 * every documented operation is a route (GET and its HEAD), and over real HTTP each answer of a
 * running reader (with rate limits in Redis and a marketplace) has a documented status, media type,
 * body schema and headers: GET and HEAD against their operations, the 405 of any other method
 * against the one listed with the path's GET.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCatalog } from '../../src/catalog/redis-catalog.js';
import type { Config, Plan } from '../../src/config.js';
import { createKeyStore } from '../../src/keys/store.js';
import { buildReaderApp } from '../../src/reader/app.js';
import { createReaderState, type ReaderState } from '../../src/reader/state.js';
import { createRedis } from '../../src/redis/connect.js';
import { createReaderFixture, IN_TEST_PRESSURE, type ReaderFixture } from '../helpers/reader-fixture.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';

const LIVE = 'site_live_northwind_soccer.json';
const PREGAME = 'site_pregame_northwind_soccer.json';
const SECRET = 'openapi-test-proxy-secret';

type Json = Record<string, unknown>;
interface Operation {
  operationId: string;
  security?: unknown[];
  parameters?: Json[];
  responses: Record<string, { description: string; headers?: Record<string, Json>; content?: Record<string, { schema: Json }> }>;
}
interface Doc {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, Json>; schemas: Record<string, Json> };
  security: Record<string, unknown[]>[];
}

let fx: ReaderFixture;
let app: FastifyInstance;
let state: ReaderState;
let base: string;
const extra: Redis[] = [];
const routes: { method: string; url: string }[] = [];
const keys = { pro: '', free: '' };
let raw: Doc;
let resolved: Doc;

beforeAll(async () => {
  fx = await createReaderFixture('openapi');
  const plans: Record<string, Plan> = {
    free: { name: 'free', allow: ['site_pregame_*'], rate: { max: 3, perMs: 60_000 }, streams: undefined },
    pro: { name: 'pro', allow: ['*'], rate: { max: 1000, perMs: 60_000 }, streams: undefined },
  };
  const config: Config = {
    ...fx.config,
    plans,
    marketplaces: [{ name: 'mkt', secretHeader: 'x-mkt-secret', secret: SECRET, userHeader: 'x-mkt-user', planHeader: 'x-mkt-plan', plans: { GOLD: 'pro' } }],
  };
  await fx.publish(LIVE, { bookmaker: 'northwind', sport: 'soccer', events: [] });
  await fx.publish(PREGAME, { bookmaker: 'northwind', sport: 'soccer', events: [{ event_id: 'e1', name: 'A vs B', markets: [] }] });
  const keyStore = createKeyStore({ redis: fx.redis, keys: fx.keys, plans });
  keys.pro = (await keyStore.create({ name: 'pro', plan: 'pro' })).key;
  keys.free = (await keyStore.create({ name: 'free', plan: 'free' })).key;
  const limits = createRedis(TEST_REDIS_URL, 'client', `${fx.prefix}-limits`);
  const subscriber = createRedis(TEST_REDIS_URL, 'subscriber', `${fx.prefix}-sub`);
  extra.push(limits, subscriber);
  for (const c of extra) c.on('error', () => undefined);
  state = await createReaderState({
    config,
    redis: fx.redis,
    subscriber,
    store: fx.store,
    catalog: createCatalog(fx.redis, fx.keys),
    log: fx.log,
    registry: fx.registry,
  });
  await state.ready;
  await state.published.idle();
  app = await buildReaderApp({
    config,
    redis: fx.redis,
    store: fx.store,
    log: fx.log,
    state,
    limits: { redis: limits, subscriber },
    pressure: IN_TEST_PRESSURE,
    register: (a) => {
      a.addHook('onRoute', (r) => {
        for (const method of [r.method].flat()) routes.push({ method: String(method), url: r.url ?? '' });
      });
    },
  });
  base = (await app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
  const res = await fetch(`${base}/v1/openapi.json`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  raw = (await res.json()) as Doc;
  const validator = new Validator();
  const result = await validator.validate(structuredClone(raw) as unknown as Parameters<Validator['validate']>[0]);
  expect(result.errors ?? [], JSON.stringify(result.errors)).toEqual([]);
  expect(result.valid).toBe(true);
  expect(validator.version).toBe('3.1');
  resolved = validator.resolveRefs() as unknown as Doc;
});

afterAll(async () => {
  await app?.close();
  await state?.close();
  for (const c of extra) c.disconnect();
  await fx?.cleanup();
});

const docPath = (url: string) => url.replace(/\/\*$/, '/{filename}').replace(/:(\w+)/g, '{$1}');

describe('the document', () => {
  it('is OpenAPI 3.1 with the spec’s operation ids and the X-API-Key scheme', () => {
    expect(raw.openapi).toBe('3.1.0');
    expect(raw.paths['/v1/files']?.get?.operationId).toBe('listFiles');
    expect(raw.paths['/v1/data/{filename}']?.get?.operationId).toBe('getOddsData');
    expect(raw.components.securitySchemes.ApiKeyAuth).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
    expect(raw.security).toEqual([{ ApiKeyAuth: [] }]);
    const param = raw.paths['/v1/data/{filename}']!.get!.parameters!;
    expect(param).toEqual([expect.objectContaining({ name: 'filename', in: 'path', required: true })]);
    expect(raw.paths['/v1/openapi.json']?.get?.security).toEqual([]);
    expect(raw.paths['/v1/files']?.head?.operationId).toBe('listFilesHead');
    expect(raw.paths['/v1/data/{filename}']?.head?.operationId).toBe('getOddsDataHead');
    expect(raw.paths['/v1/data/{filename}']!.head!.parameters).toEqual(param);
  });

  it('documents the 405 of other methods, with Allow, on every /v1 path; and HEAD without bodies', () => {
    for (const [path, ops] of Object.entries(raw.paths)) {
      for (const method of ['get', 'head']) {
        const r405 = ops[method]?.responses['405'];
        expect(r405, `${method} ${path} 405`).toBeDefined();
        expect(Object.keys(r405!.headers ?? {})).toContain('Allow');
        expect(r405!.headers!.Allow!.description).toContain('GET, HEAD');
      }
      for (const [status, response] of Object.entries(ops.head!.responses)) expect(response.content, `head ${path} ${status}`).toBeUndefined();
      expect(Object.keys(ops.head!.responses).sort()).toEqual(Object.keys(ops.get!.responses).sort());
    }
    // The 304 of a download names every header it is sent with.
    expect(Object.keys(raw.paths['/v1/data/{filename}']!.get!.responses['304']!.headers!)).toEqual(
      expect.arrayContaining(['ETag', 'Cache-Control', 'Last-Modified', 'Vary']),
    );
  });

  it('documents every error status with the problem schema and the rate-limit headers', () => {
    for (const id of ['listFiles', 'getOddsData']) {
      const op = Object.values(raw.paths)
        .flatMap((p) => Object.values(p))
        .find((o) => o.operationId === id)!;
      const statuses = Object.keys(op.responses);
      expect(statuses).toEqual(expect.arrayContaining(['200', '304', '401', '403', '405', '429', '503']));
      if (id === 'getOddsData') expect(statuses).toContain('404');
      for (const [status, response] of Object.entries(op.responses)) {
        if (Number(status) < 400) continue;
        expect(Object.keys(response.content ?? {}), `${id} ${status}`).toEqual(['application/problem+json']);
        expect(response.content!['application/problem+json']!.schema).toEqual({ $ref: '#/components/schemas/Problem' });
      }
      for (const status of ['200', '304', '429']) {
        expect(Object.keys(op.responses[status]!.headers ?? {})).toEqual(
          expect.arrayContaining(['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'RateLimit-Policy', 'RateLimit']),
        );
      }
      expect(Object.keys(op.responses['429']!.headers!)).toContain('Retry-After');
      expect(Object.keys(op.responses['503']!.headers!)).toContain('Retry-After');
    }
    expect(raw.components.schemas.Problem).toMatchObject({ required: ['type', 'title', 'status', 'detail'] });
  });

  it('documents exactly the /v1 routes of the app', () => {
    const live = new Set(
      routes.filter((r) => (r.method === 'GET' || r.method === 'HEAD') && r.url.startsWith('/v1/')).map((r) => `${r.method.toLowerCase()} ${docPath(r.url)}`),
    );
    expect(live.size).toBe(10);
    const documented = new Set(Object.entries(raw.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`)));
    expect([...documented].sort()).toEqual([...live].sort());
    // Nothing outside /v1 (health, metrics, admin) is in it.
    expect(Object.keys(raw.paths).every((p) => p.startsWith('/v1/'))).toBe(true);
  });
});

describe('the live app answers as documented', () => {
  const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });

  /**
   * One request over HTTP, checked against the resolved document: against the operation of its
   * method, or for another method (no operation of its own) against the path's GET, where the 405
   * is listed.
   */
  async function check(path: string, headers: Record<string, string>, expected: number, rated = true, method = 'GET', payload?: string) {
    const res = await fetch(`${base}${path}`, { method, headers, ...(payload === undefined ? {} : { body: payload }) });
    const body = Buffer.from(await res.arrayBuffer());
    const template = path.startsWith('/v1/data/') ? '/v1/data/{filename}' : path.split('?')[0]!;
    const item = resolved.paths[template];
    const op = item?.[method.toLowerCase()] ?? (method !== 'GET' && method !== 'HEAD' ? item?.get : undefined);
    expect(op, `${method} ${path} is documented`).toBeDefined();
    expect(res.status, path).toBe(expected);
    const documented = op!.responses[String(res.status)];
    expect(documented, `${path}: status ${res.status} is documented`).toBeDefined();
    if (body.length > 0) {
      const type = (res.headers.get('content-type') ?? '').split(';')[0]!.trim();
      const media = documented!.content?.[type];
      expect(media, `${path} ${res.status}: ${type} is documented`).toBeDefined();
      const validate = ajv.compile(media!.schema);
      const ok = validate(JSON.parse(body.toString('utf8')));
      expect(ok, `${path} ${res.status}: ${JSON.stringify(validate.errors)}`).toBe(true);
    } else {
      expect(documented!.content, `${path} ${res.status} has no body`).toBeUndefined();
    }
    // Every documented header the answer carries is documented; those that must be there are.
    const names = Object.keys(documented!.headers ?? {}).map((h) => h.toLowerCase());
    if (rated && [200, 304, 429].includes(res.status)) {
      for (const h of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy', 'ratelimit']) {
        expect(names).toContain(h);
        expect(res.headers.get(h), `${path} ${res.status} ${h}`).not.toBeNull();
      }
    }
    if (res.status === 429 || res.status === 503) expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    for (const h of ['ratelimit-limit', 'retry-after', 'etag', 'www-authenticate', 'allow', 'vary', 'last-modified', 'content-encoding']) {
      if (res.headers.get(h) !== null) expect(names, `${method} ${path} ${res.status} sends ${h}`).toContain(h);
    }
    if (res.status === 405) expect(res.headers.get('allow')).toBe('GET, HEAD');
    return { res, body };
  }

  it('listFiles: 200, 304, 401, 403 (unmapped marketplace plan), 429', async () => {
    const ok = await check('/v1/files', { 'x-api-key': keys.pro }, 200);
    await check('/v1/files', { 'x-api-key': keys.pro, 'if-none-match': ok.res.headers.get('etag')! }, 304);
    await check('/v1/files', {}, 401, false);
    await check('/v1/files', { 'x-mkt-secret': SECRET, 'x-mkt-user': 'u1', 'x-mkt-plan': 'TIN' }, 403, false);
    await check('/v1/files', { 'x-mkt-secret': SECRET, 'x-mkt-user': 'u1', 'x-mkt-plan': 'GOLD' }, 200);
  });

  it('getOddsData: 200, 304, 400, 401, 403, 404, 429', async () => {
    const ok = await check(`/v1/data/${PREGAME}`, { 'x-api-key': keys.pro }, 200);
    await check(`/v1/data/${PREGAME}`, { 'x-api-key': keys.pro, 'if-none-match': ok.res.headers.get('etag')! }, 304);
    await check('/v1/data/%E0%A4%A', { 'x-api-key': keys.pro }, 400, false);
    await check(`/v1/data/${LIVE}`, { 'x-api-key': 'odf_nope' }, 401, false);
    await check(`/v1/data/${LIVE}`, { 'x-api-key': keys.free }, 403);
    await check('/v1/data/site_live_nobody_soccer.json', { 'x-api-key': keys.pro }, 404);
    await check(`/v1/data/${PREGAME}`, { 'x-api-key': keys.free }, 200);
    await check(`/v1/data/${PREGAME}`, { 'x-api-key': keys.free }, 200);
    await check(`/v1/data/${PREGAME}`, { 'x-api-key': keys.free }, 429); // free: 3 a minute, 403 included
    await check('/v1/files', { 'x-api-key': keys.free }, 429);
  });

  it('a 304 of a download carries the headers its documented response lists, Vary included', async () => {
    const ok = await check(`/v1/data/${PREGAME}`, { 'x-api-key': keys.pro, 'accept-encoding': 'gzip' }, 200);
    const { res } = await check(`/v1/data/${PREGAME}`, { 'x-api-key': keys.pro, 'accept-encoding': 'gzip', 'if-none-match': ok.res.headers.get('etag')! }, 304);
    const documented = resolved.paths['/v1/data/{filename}']!.get!.responses['304']!;
    for (const h of ['ETag', 'Cache-Control', 'Last-Modified', 'Vary', 'RateLimit-Limit']) expect(res.headers.get(h), h).not.toBeNull();
    for (const h of ['etag', 'cache-control', 'last-modified', 'vary']) {
      expect(Object.keys(documented.headers!).map((n) => n.toLowerCase())).toContain(h);
    }
    expect(res.headers.get('vary')).toBe('Accept-Encoding, A-IM');
  });

  it('HEAD: the answers of GET without their bodies, as documented', async () => {
    const ok = await check('/v1/files', { 'x-api-key': keys.pro }, 200, true, 'HEAD');
    await check('/v1/files', { 'x-api-key': keys.pro, 'if-none-match': ok.res.headers.get('etag')! }, 304, true, 'HEAD');
    await check('/v1/files', {}, 401, false, 'HEAD');
    await check(`/v1/data/${PREGAME}`, { 'x-api-key': keys.pro }, 200, true, 'HEAD');
    await check('/v1/data/site_live_nobody_soccer.json', { 'x-api-key': keys.pro }, 404, true, 'HEAD');
    await check('/v1/openapi.json', {}, 200, false, 'HEAD');
  });

  it('another method: 405 with Allow, as documented on each path, whatever the body', async () => {
    for (const path of ['/v1/files', `/v1/data/${PREGAME}`, '/v1/openapi.json']) {
      await check(path, { 'x-api-key': keys.pro }, 405, false, 'POST');
      await check(path, { 'x-api-key': keys.pro, 'content-type': 'application/json' }, 405, false, 'POST', '{bad');
      await check(path, {}, 405, false, 'DELETE');
      await check(path, { 'content-type': 'text/plain' }, 405, false, 'PUT', 'x');
    }
  });

  it('getOpenApi: 200, the same bytes every time', async () => {
    const a = (await check('/v1/openapi.json', {}, 200, false)).body.toString('utf8');
    const b = await (await fetch(`${base}/v1/openapi.json`)).text();
    expect(b).toBe(a);
  });
});
