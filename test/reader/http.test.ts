/** The reader over HTTP (inject): every status, the order of checks, headers, codings, logs. */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpProblem } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { toProblem } from '../../src/reader/problem.js';
import type { RateLimitCheck } from '../../src/reader/limits/rate-limit.js';
import { createFsStore } from '../../src/store/fs-store.js';
import { createReaderFixture, oddsDocument, type ReaderFixture, type ReaderInstance } from '../helpers/reader-fixture.js';

const PREGAME = 'site_pregame_northwind_soccer.json';
const LIVE = 'site_live_northwind_soccer.json';
const LIVEPRE = 'site_livepre_oddsport.json';
const UNPUBLISHED_LIVE = 'site_live_bluewater_tennis.json';
const UNPUBLISHED_PREGAME = 'site_pregame_bluewater_tennis.json';

let fx: ReaderFixture;
let reader: ReaderInstance;
const keys = { pro: '', free: '', live: '', revoked: '' };
const bytes = new Map<string, Buffer>();
const responses: LightMyRequestResponse[] = [];

async function get(url: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' | 'POST' | 'DELETE' = 'GET') {
  const res = await reader.app.inject({ method, url, headers });
  responses.push(res);
  return res;
}

function expectProblem(res: LightMyRequestResponse, status: number) {
  expect(res.statusCode).toBe(status);
  expect(res.headers['content-type']).toBe('application/problem+json');
  const body = res.json() as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(['detail', 'status', 'title', 'type']);
  expect(body.status).toBe(status);
  expect(typeof body.title).toBe('string');
  expect(typeof body.detail).toBe('string');
  expect(String(body.type)).toMatch(/^https:\/\/oddsfiles\.dev\/problems\/[a-z-]+$/);
  return body;
}

beforeAll(async () => {
  fx = await createReaderFixture('reader-http');
  for (const [name, sport, size] of [
    [PREGAME, 'soccer', 200_000],
    [LIVE, 'soccer', 3000],
  ] as const) {
    const doc = Buffer.from(JSON.stringify(oddsDocument('northwind', sport, size)));
    bytes.set(name, doc);
    await fx.publish(name, doc);
  }
  const livepre = Buffer.from(JSON.stringify({ bookmaker: 'oddsport', events: [] }));
  bytes.set(LIVEPRE, livepre);
  await fx.publish(LIVEPRE, livepre);

  keys.pro = (await fx.keyStore.create({ name: 'pro-customer', plan: 'pro' })).key;
  keys.free = (await fx.keyStore.create({ name: 'free-customer', plan: 'free' })).key;
  keys.live = (await fx.keyStore.create({ name: 'live-only', allow: ['site_live_*'] })).key;
  keys.revoked = (await fx.keyStore.create({ name: 'gone', plan: 'pro' })).key;
  await fx.keyStore.revoke('gone');
  reader = await fx.start();
  await reader.state.ready;
  await reader.state.published.idle();
});

afterAll(async () => {
  await fx?.cleanup();
});

describe('GET /v1/files', () => {
  it('lists the published files the key may read, sorted', async () => {
    const pro = await get('/v1/files', { 'x-api-key': keys.pro });
    expect(pro.statusCode).toBe(200);
    expect(pro.headers['content-type']).toMatch(/^application\/json/);
    expect(pro.headers['cache-control']).toBe('private, no-cache');
    expect(pro.json()).toEqual({ files: [LIVEPRE, LIVE, PREGAME].sort() });
    expect((await get('/v1/files', { 'x-api-key': keys.free })).json()).toEqual({ files: [PREGAME] });
    expect((await get('/v1/files', { 'x-api-key': keys.live })).json()).toEqual({ files: [LIVE] });
  });

  it('answers 304 to its own ETag', async () => {
    const first = await get('/v1/files', { 'x-api-key': keys.pro });
    const etag = String(first.headers.etag);
    const again = await get('/v1/files', { 'x-api-key': keys.pro, 'if-none-match': etag });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
  });

  it('401 without, with an unknown, a malformed or a revoked key', async () => {
    const variants: Record<string, string>[] = [
      {},
      { 'x-api-key': '' },
      { 'x-api-key': `odf_${'A'.repeat(43)}` },
      { 'x-api-key': 'nonsense' },
      { 'x-api-key': keys.revoked },
    ];
    for (const headers of variants) {
      const res = await get('/v1/files', headers);
      expectProblem(res, 401);
      expect(res.headers['www-authenticate']).toContain('X-API-Key');
    }
  });
});

describe('GET /v1/data/{filename}', () => {
  it('serves the published bytes with their headers', async () => {
    const res = await get(`/v1/data/${LIVE}`, { 'x-api-key': keys.pro });
    expect(res.statusCode).toBe(200);
    expect(res.rawPayload.equals(bytes.get(LIVE)!)).toBe(true);
    const entry = (await fx.catalog.get(LIVE))!;
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.headers.etag).toBe(`"${entry.sha256.slice(0, 32)}"`);
    expect(res.headers['last-modified']).toBe(new Date(entry.publishedAt).toUTCString());
    expect(res.headers['cache-control']).toBe('private, no-cache');
    expect(res.headers.vary).toBe('Accept-Encoding, A-IM');
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(Number(res.headers['content-length'])).toBe(bytes.get(LIVE)!.length);
  });

  it('HEAD gives the headers without the body', async () => {
    const res = await get(`/v1/data/${LIVE}`, { 'x-api-key': keys.pro }, 'HEAD');
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('');
    expect(res.headers.etag).toBeDefined();
  });

  it('If-None-Match: 304 for the current ETag, in a list, weak, or *; 200 otherwise', async () => {
    const etag = String((await get(`/v1/data/${LIVE}`, { 'x-api-key': keys.pro })).headers.etag);
    for (const inm of [etag, `"nope", ${etag}`, `W/${etag}`, '*']) {
      const res = await get(`/v1/data/${LIVE}`, { 'x-api-key': keys.pro, 'if-none-match': inm });
      expect(res.statusCode, inm).toBe(304);
      expect(res.body).toBe('');
      expect(res.headers.etag).toBe(etag);
      expect(res.headers['cache-control']).toBe('private, no-cache');
      expect(res.headers.vary).toBe('Accept-Encoding, A-IM');
    }
    const stale = await get(`/v1/data/${LIVE}`, { 'x-api-key': keys.pro, 'if-none-match': '"0000"' });
    expect(stale.statusCode).toBe(200);
  });

  it('If-Modified-Since: 304 when not modified since', async () => {
    const lm = String((await get(`/v1/data/${LIVE}`, { 'x-api-key': keys.pro })).headers['last-modified']);
    expect((await get(`/v1/data/${LIVE}`, { 'x-api-key': keys.pro, 'if-modified-since': lm })).statusCode).toBe(304);
    const before = new Date(Date.parse(lm) - 10_000).toUTCString();
    expect((await get(`/v1/data/${LIVE}`, { 'x-api-key': keys.pro, 'if-modified-since': before })).statusCode).toBe(200);
  });

  it('gzip and br bodies decode to the identity bytes, each with its own ETag', async () => {
    const original = bytes.get(PREGAME)!;
    const plain = await get(`/v1/data/${PREGAME}`, { 'x-api-key': keys.pro });
    const gz = await get(`/v1/data/${PREGAME}`, { 'x-api-key': keys.pro, 'accept-encoding': 'gzip' });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gz.rawPayload).equals(original)).toBe(true);
    expect(gz.rawPayload.length).toBeLessThan(original.length / 2);
    const br = await get(`/v1/data/${PREGAME}`, { 'x-api-key': keys.pro, 'accept-encoding': 'br' });
    expect(br.headers['content-encoding']).toBe('br');
    expect(brotliDecompressSync(br.rawPayload).equals(original)).toBe(true);
    const etags = new Set([plain.headers.etag, gz.headers.etag, br.headers.etag]);
    expect(etags.size).toBe(3);
    expect(String(gz.headers.etag)).toMatch(/-gz"$/);
    expect(String(br.headers.etag)).toMatch(/-br"$/);
    for (const r of [gz, br]) {
      expect(r.headers.vary).toBe('Accept-Encoding, A-IM');
      expect(r.headers['content-type']).toBe('application/json');
    }
    // 304 for the coding's own ETag.
    const cond = await get(`/v1/data/${PREGAME}`, { 'x-api-key': keys.pro, 'accept-encoding': 'gzip', 'if-none-match': String(gz.headers.etag) });
    expect(cond.statusCode).toBe(304);
    expect(cond.headers.etag).toBe(gz.headers.etag);
  });

  it('negotiates Accept-Encoding with q-values, br first when equal', async () => {
    const coding = async (ae: string) =>
      (await get(`/v1/data/${PREGAME}`, { 'x-api-key': keys.pro, 'accept-encoding': ae })).headers['content-encoding'] ?? 'identity';
    expect(await coding('gzip, deflate, br')).toBe('br');
    expect(await coding('br;q=0.5, gzip')).toBe('gzip');
    expect(await coding('br;q=0, gzip;q=0.1')).toBe('gzip');
    expect(await coding('gzip;q=0, br;q=0')).toBe('identity');
    expect(await coding('*')).toBe('br');
    expect(await coding('identity')).toBe('identity');
    expect(await coding('deflate')).toBe('identity');
    expect(await coding('GZIP')).toBe('gzip');
  });

  it('404 for a valid filename that is not published', async () => {
    expectProblem(await get(`/v1/data/${UNPUBLISHED_LIVE}`, { 'x-api-key': keys.pro }), 404);
  });

  it('404 for names that are not feed filenames, traversal included', async () => {
    const names = [
      'nope.json',
      '..%2Fetc%2Fpasswd',
      '..%2F..%2F..%2Fetc%2Fpasswd',
      '%2e%2e%2f%2e%2e%2fetc%2fpasswd',
      '../etc/passwd',
      'objects%2Fsite_live_northwind_soccer.json',
      'manifest.json',
      'SITE_LIVE_NORTHWIND_SOCCER.JSON',
      `${LIVE}%00`,
      `${LIVE}/`,
      '',
      'a'.repeat(300),
    ];
    for (const name of names) {
      const res = await get(`/v1/data/${name}`, { 'x-api-key': keys.pro });
      expect(res.statusCode, name).toBe(404);
      expectProblem(res, 404);
    }
  });

  it('403 for a published file outside the allow-list', async () => {
    expectProblem(await get(`/v1/data/${LIVE}`, { 'x-api-key': keys.free }), 403);
    expectProblem(await get(`/v1/data/${PREGAME}`, { 'x-api-key': keys.live }), 403);
    expect((await get(`/v1/data/${PREGAME}`, { 'x-api-key': keys.free })).statusCode).toBe(200);
  });

  it('401 without, with an unknown, or with a revoked key', async () => {
    expectProblem(await get(`/v1/data/${LIVE}`), 401);
    expectProblem(await get(`/v1/data/${LIVE}`, { 'x-api-key': `odf_${'B'.repeat(43)}` }), 401);
    expectProblem(await get(`/v1/data/${LIVE}`, { 'x-api-key': keys.revoked }), 401);
  });
});

describe('order of checks: key, rate, published, allow-list', () => {
  it('an unknown key gets 401 whatever the name', async () => {
    expectProblem(await get(`/v1/data/${UNPUBLISHED_LIVE}`, { 'x-api-key': 'odf_wrong' }), 401);
    expectProblem(await get('/v1/data/..%2Fetc%2Fpasswd'), 401);
    expectProblem(await get(`/v1/data/${LIVE}`, { 'x-api-key': keys.revoked }), 401);
  });

  it('a valid key gets 404 for an unpublished name even when not allowed', async () => {
    expectProblem(await get(`/v1/data/${UNPUBLISHED_LIVE}`, { 'x-api-key': keys.free }), 404);
    expectProblem(await get(`/v1/data/${UNPUBLISHED_PREGAME}`, { 'x-api-key': keys.live }), 404);
  });

  it('published and not allowed: 403', async () => {
    expectProblem(await get(`/v1/data/${LIVEPRE}`, { 'x-api-key': keys.free }), 403);
  });

  it('the rate-limit hook runs after authentication and before the filename checks', async () => {
    const seen: string[] = [];
    const deny: RateLimitCheck = (principal) => {
      seen.push(principal.id);
      return { allowed: false, retryAfterS: 7.2, headers: { 'ratelimit-limit': '30' } };
    };
    const limited = await fx.start({ rateLimit: deny });
    try {
      const call = (url: string, key?: string) => limited.app.inject({ url, headers: key ? { 'x-api-key': key } : {} });
      expectProblem(await call('/v1/files'), 401);
      expectProblem(await call(`/v1/data/${UNPUBLISHED_LIVE}`, 'odf_nope'), 401);
      expect(seen).toEqual([]);
      for (const url of ['/v1/files', `/v1/data/${UNPUBLISHED_LIVE}`, `/v1/data/${LIVEPRE}`, `/v1/data/${PREGAME}`]) {
        const res = await call(url, keys.free);
        responses.push(res);
        expectProblem(res, 429);
        expect(res.headers['retry-after']).toBe('8');
        expect(res.headers['ratelimit-limit']).toBe('30');
      }
      expect(seen).toHaveLength(4);
    } finally {
      await limited.close();
    }
  });

  it('an allowing rate-limit hook adds its headers and lets the request through', async () => {
    const allow: RateLimitCheck = async () => ({ allowed: true, headers: { 'ratelimit-remaining': '5' } });
    const limited = await fx.start({ rateLimit: allow });
    try {
      const res = await limited.app.inject({ url: `/v1/data/${LIVE}`, headers: { 'x-api-key': keys.pro } });
      expect(res.statusCode).toBe(200);
      expect(res.headers['ratelimit-remaining']).toBe('5');
    } finally {
      await limited.close();
    }
  });
});

describe('every error is a problem', () => {
  it('unknown routes: 404', async () => {
    expectProblem(await get('/'), 404);
    expectProblem(await get('/v2/files', { 'x-api-key': keys.pro }), 404);
    expectProblem(await get('/v1/files/', { 'x-api-key': keys.pro }), 404);
  });

  it('wrong methods on known paths: 405 with Allow', async () => {
    for (const url of ['/v1/files', `/v1/data/${LIVE}`]) {
      for (const method of ['POST', 'DELETE'] as const) {
        const res = await get(url, { 'x-api-key': keys.pro }, method);
        expectProblem(res, 405);
        expect(res.headers.allow).toBe('GET, HEAD');
      }
    }
    const withBody = await reader.app.inject({ method: 'POST', url: '/v1/files', payload: '<xml/>', headers: { 'content-type': 'text/xml' } });
    expectProblem(withBody, 405);
    expect(withBody.headers.allow).toBe('GET, HEAD');
  });

  it('another method on an API path: 405 + Allow before any body is read, whatever the body', async () => {
    const paths = [
      '/v1/files',
      `/v1/data/${LIVE}`,
      `/v1/data/${UNPUBLISHED_LIVE}`,
      '/v1/data/..%2Fetc%2Fpasswd',
      '/v1/openapi.json',
      '/healthz',
      '/readyz',
      '/metrics',
    ];
    const bodies: [string, string][] = [
      ['application/json', '{bad'],
      ['application/json', '{"files":[]}'],
      ['text/xml', '<xml/>'],
      ['application/json', `"${'x'.repeat(64 * 1024)}"`], // over the body limit
      ['application/x-unknown', 'anything'],
    ];
    const comparable = (res: LightMyRequestResponse) => {
      const { date: _date, 'content-length': _length, ...rest } = res.headers;
      return rest;
    };
    for (const url of paths) {
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const) {
        // The answer to the bodiless request, as it always was.
        const bare = await reader.app.inject({ method, url, headers: { 'x-api-key': keys.pro } });
        responses.push(bare);
        expectProblem(bare, 405);
        expect(bare.headers.allow).toBe('GET, HEAD');
        expect(bare.json().detail).toBe(`Only GET and HEAD are allowed here, not ${method}.`);
        expect(bare.headers.connection).not.toBe('close');
        for (const [type, payload] of bodies) {
          const what = `${method} ${url} ${type} ${payload.slice(0, 20)}`;
          const res = await reader.app.inject({ method, url, payload, headers: { 'x-api-key': keys.pro, 'content-type': type } });
          expect(res.statusCode, what).toBe(405);
          expect(comparable(res), what).toEqual(comparable(bare));
          expect(res.body, what).toBe(bare.body);
        }
      }
    }
    // Without a key too: the method is refused before anything else is looked at.
    const anonymous = await reader.app.inject({ method: 'POST', url: '/v1/files', payload: '{bad', headers: { 'content-type': 'application/json' } });
    expectProblem(anonymous, 405);
    expect(anonymous.headers.allow).toBe('GET, HEAD');
    // A path the API does not have stays a 404 (and its body is still Fastify's to refuse).
    expectProblem(await reader.app.inject({ method: 'POST', url: '/nowhere', headers: { 'x-api-key': keys.pro } }), 404);
    expectProblem(await reader.app.inject({ method: 'POST', url: '/nowhere', payload: '{bad', headers: { 'content-type': 'application/json' } }), 400);
  });

  it('a framework error with a bare status gets the general problem of that status, never an admin one', () => {
    for (const [statusCode, type, title] of [
      [401, 'unauthorized', 'Missing or invalid API key'],
      [403, 'forbidden', 'Not allowed for this key'],
      [404, 'not-found', 'Not found'],
    ] as const) {
      const problem = toProblem(Object.assign(new Error('x'), { statusCode }));
      expect(problem.type).toBe(`https://oddsfiles.dev/problems/${type}`);
      expect(problem.title).toBe(title);
    }
  });

  it('a malformed URL: 400', async () => {
    expectProblem(await get('/v1/data/%E0%A4%A', { 'x-api-key': keys.pro }), 400);
  });

  it('a request Node cannot parse gets a problem too', async () => {
    const listening = await fx.start();
    try {
      const address = await listening.app.listen({ host: '127.0.0.1', port: 0 });
      const { port } = new URL(address);
      const raw = await rawRequest(Number(port), 'GET /v1/files HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n');
      expect(raw).toMatch(/^HTTP\/1\.1 400 /);
      expect(raw).toContain('Content-Type: application/problem+json');
      expect(raw).toContain('"status":400');
    } finally {
      await listening.close();
    }
  });
});

describe('extension point', () => {
  it('register() adds hooks and routes before the reader’s own; their errors are problems too', async () => {
    const seen: string[] = [];
    const instance = await fx.start({
      register: (app) => {
        app.addHook('onResponse', (request, reply, done) => {
          seen.push(`${request.routeOptions.url ?? 'unmatched'} ${reply.statusCode}`);
          done();
        });
        app.get('/metrics', async () => {
          throw new HttpProblem('unauthorized', 'Admin token required.');
        });
      },
    });
    try {
      expectProblem(await instance.app.inject({ url: '/metrics' }), 401);
      expect((await instance.app.inject({ url: `/v1/data/${LIVE}`, headers: { 'x-api-key': keys.pro } })).statusCode).toBe(200);
      await instance.app.inject({ url: '/nowhere' });
      expect(seen).toEqual(['/metrics 401', '/v1/data/* 200', 'unmatched 404']);
    } finally {
      await instance.close();
    }
  });
});

describe('health', () => {
  it('/healthz: 200', async () => {
    const res = await get('/healthz');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
  });

  it('/readyz: 200 when Redis and the store answer', async () => {
    expect((await get('/readyz')).statusCode).toBe(200);
  });

  it('/readyz: 503 when the store does not answer', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-gone-'));
    const store = createFsStore(pathToFileURL(join(dir, 'store')).href);
    const instance = await fx.start({ store });
    try {
      await rm(dir, { recursive: true, force: true });
      // ping() creates the folder on first use; make that impossible.
      await writeFile(dir, 'not a folder');
      const res = await instance.app.inject({ url: '/readyz' });
      expectProblem(res, 503);
      expect(res.json().detail).toContain('store');
    } finally {
      await instance.close();
      await rm(dir, { force: true });
    }
  });

  it('/readyz: 503 when Redis does not answer; /v1 answers 503 until keys can be loaded', async () => {
    const instance = await fx.start({ redisUrl: 'redis://127.0.0.1:1' });
    try {
      const res = await instance.app.inject({ url: '/readyz' });
      expectProblem(res, 503);
      expect(res.json().detail).toContain('Redis');
      // The catalog came from the store's manifest (if any); the keys need Redis.
      const files = await instance.app.inject({ url: '/v1/files', headers: { 'x-api-key': keys.pro } });
      expectProblem(files, 503);
      expect(files.headers['retry-after']).toBe('1');
      expect((await instance.app.inject({ url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await instance.close();
    }
  });
});

describe('keys never leak', () => {
  it('a key sent in the URL is scrubbed from the log line', async () => {
    await get(`/v1/data/${keys.pro}?key=${keys.free}`, { 'x-api-key': keys.pro });
    await get(`/v1/files?api_key=${keys.pro}`, { 'x-api-key': keys.pro });
  });

  it('logs one line per request, with the key id and never a key', async () => {
    const before = fx.logLines.length;
    await get('/v1/files', { 'x-api-key': keys.pro });
    await get(`/v1/data/${LIVE}`, { 'x-api-key': keys.free });
    await get('/nowhere');
    const added = fx.logLines.slice(before).map((l) => JSON.parse(l) as Record<string, unknown>);
    const requestLines = added.filter((l) => l.msg === 'request');
    expect(requestLines).toHaveLength(3);
    expect(requestLines.map((l) => [l.method, l.url, l.status])).toEqual([
      ['GET', '/v1/files', 200],
      ['GET', `/v1/data/${LIVE}`, 403],
      ['GET', '/nowhere', 404],
    ]);
    expect(String(requestLines[0]!.keyId)).toMatch(/^key_[0-9a-f]{12}$/);
    expect(fx.logLines.some((l) => /incoming request|request completed/.test(l))).toBe(false);
    for (const key of Object.values(keys)) {
      for (const line of fx.logLines) expect(line).not.toContain(key);
    }
  });

  it('no response carries a key', () => {
    expect(responses.length).toBeGreaterThan(40);
    for (const res of responses) {
      const text = `${JSON.stringify(res.headers)}\n${res.body}`;
      for (const key of Object.values(keys)) expect(text).not.toContain(key);
    }
  });

  it('a logger that would log the headers redacts X-API-Key', () => {
    const lines: string[] = [];
    const log = createLogger({
      level: 'info',
      pretty: false,
      destination: new Writable({
        write(c: Buffer, _e, cb) {
          lines.push(c.toString());
          cb();
        },
      }),
    });
    log.info({ req: { headers: { 'x-api-key': keys.pro } } }, 'x');
    expect(lines.join('')).not.toContain(keys.pro);
    expect(lines.join('')).toContain('[redacted]');
  });
});

describe('the request log', () => {
  it('reader.request_log: "errors" logs only responses of 400 and up, "off" none, and a failure is logged either way', async () => {
    const boom = (app: FastifyInstance) => {
      app.get('/boom', () => {
        throw new Error('kaput');
      });
    };
    const requestLines = async (instance: ReaderInstance, url: string, headers: Record<string, string> = {}) => {
      const before = fx.logLines.length;
      const res = await instance.app.inject({ method: 'GET', url, headers });
      const added = fx.logLines.slice(before).map((l) => JSON.parse(l) as Record<string, unknown>);
      return { status: res.statusCode, lines: added.filter((l) => l.msg === 'request'), errors: added.filter((l) => Number(l.level) >= 50) };
    };
    const errorsOnly = await fx.start({ reader: { requestLog: 'errors' }, register: boom });
    const off = await fx.start({ reader: { requestLog: 'off' }, register: boom });
    try {
      await errorsOnly.state.ready;
      await off.state.ready;
      const ok = await requestLines(errorsOnly, '/v1/files', { 'x-api-key': keys.pro });
      expect(ok.status).toBe(200);
      expect(ok.lines).toHaveLength(0);
      const notModified = await requestLines(errorsOnly, '/v1/files', { 'x-api-key': keys.pro, 'if-none-match': '*' });
      expect(notModified.status).toBe(304);
      expect(notModified.lines).toHaveLength(0);
      for (const [url, headers, status] of [
        ['/v1/files', {}, 401],
        [`/v1/data/${LIVE}`, { 'x-api-key': keys.free }, 403],
        ['/nowhere', {}, 404],
      ] as const) {
        const r = await requestLines(errorsOnly, url, headers);
        expect(r.status).toBe(status);
        expect(r.lines.map((l) => [l.url, l.status])).toEqual([[url, status]]);
      }
      for (const [url, headers, status] of [
        ['/v1/files', { 'x-api-key': keys.pro }, 200],
        ['/v1/files', {}, 401],
        ['/nowhere', {}, 404],
      ] as const) {
        const r = await requestLines(off, url, headers);
        expect(r.status).toBe(status);
        expect(r.lines).toHaveLength(0);
      }
      for (const instance of [errorsOnly, off]) {
        const failed = await requestLines(instance, '/boom');
        expect(failed.status).toBe(500);
        expect(failed.errors.length).toBeGreaterThan(0);
        expect(JSON.stringify(failed.errors)).toContain('kaput');
      }
    } finally {
      await errorsOnly.close();
      await off.close();
    }
  });
});

function rawRequest(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let out = '';
    socket.on('data', (d) => (out += d.toString()));
    socket.on('close', () => resolve(out));
    socket.on('error', reject);
  });
}
