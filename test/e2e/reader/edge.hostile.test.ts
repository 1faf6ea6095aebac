/**
 * The hardened edge: a table of hostile requests, sent over raw sockets (most of them fetch would
 * refuse to send) to a running `oddsfiles start`, must all get a 4xx problem (never a 5xx, never
 * a stack trace or an internal path), and the process must survive them. In process: the
 * header timeout (slow loris → 408) and overload shedding (503 + Retry-After, /healthz exempt).
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCatalog } from '../../../src/catalog/redis-catalog.js';
import { buildReaderApp, type EdgeLimits, type PressureLimits } from '../../../src/reader/app.js';
import { createReaderState } from '../../../src/reader/state.js';
import { createRedis } from '../../../src/redis/connect.js';
import { createReaderFixture, type ReaderFixture } from '../../helpers/reader-fixture.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, ROOT, runCli, startOddsfiles, type RunningOddsfiles } from '../../helpers/service.js';

interface RawAnswer {
  readonly status: number;
  readonly head: string;
  readonly body: string;
  readonly raw: string;
}

/** Send bytes, read until the server closes (or `timeoutMs`), parse the first response. */
function raw(port: number, text: string | Buffer, timeoutMs = 5000): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let out = '';
    const finish = () => {
      clearTimeout(timer);
      // Interim answers (100 Continue) come first: the final one is what counts.
      const final = out.replace(/^(?:HTTP\/1\.1 1\d\d [^\r]*\r\n(?:[^\r]+\r\n)*\r\n)+/, '');
      const end = final.indexOf('\r\n\r\n');
      const head = end >= 0 ? final.slice(0, end) : final;
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(final);
      resolve({ status: m ? Number(m[1]) : 0, head, body: end >= 0 ? final.slice(end + 4) : '', raw: out });
    };
    const timer = setTimeout(() => {
      socket.destroy();
      finish();
    }, timeoutMs);
    socket.on('data', (d) => {
      out += d.toString('latin1');
      // A complete final response with a Content-Length: no need to wait for the close.
      const final = out.replace(/^(?:HTTP\/1\.1 1\d\d [^\r]*\r\n(?:[^\r]+\r\n)*\r\n)+/, '');
      const end = final.indexOf('\r\n\r\n');
      const len = /\r\ncontent-length: (\d+)/i.exec(final.slice(0, end));
      if (end >= 0 && len && final.length - end - 4 >= Number(len[1])) {
        socket.destroy();
        finish();
      }
    });
    socket.on('close', finish);
    socket.on('error', () => undefined);
  });
}

const LIVE = 'site_live_northwind_soccer.json';

describe('hostile requests against a running reader', () => {
  const prefix = uniquePrefix('edge');
  let svc: RunningOddsfiles;
  let port: number;
  let key: string;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = await makeDataDir('edge');
    const env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    port = Number(new URL(svc.url!).port);
    const res = await runCli(env, ['keys', 'create', '--name', 'edge', '--plan', 'pro']);
    expect(res.code, res.stderr).toBe(0);
    key = res.stdout.trim();
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  const get = (target: string, headers = '') => `GET ${target} HTTP/1.1\r\nHost: localhost\r\n${headers}Connection: close\r\n\r\n`;
  const withKey = () => `X-API-Key: ${key}\r\n`;

  // [name, request, allowed statuses]
  const table = (): [string, string | Buffer, number[]][] => [
    ['traversal, raw', get('/v1/data/../../etc/passwd', withKey()), [404]],
    ['traversal, encoded', get('/v1/data/..%2F..%2F..%2Fetc%2Fpasswd', withKey()), [404]],
    ['traversal, double-encoded', get('/v1/data/%252e%252e%252fetc%252fpasswd', withKey()), [404]],
    ['traversal, dot segments encoded', get('/v1/data/%2e%2e/%2e%2e/etc/passwd', withKey()), [404]],
    ['traversal, backslashes', get('/v1/data/..\\..\\windows\\win.ini', withKey()), [400, 404]],
    ['traversal, into the store', get(`/v1/data/objects%2F${LIVE}`, withKey()), [404]],
    ['encoded NUL', get(`/v1/data/${LIVE}%00`, withKey()), [400, 404]],
    ['encoded NUL mid-name', get('/v1/data/site_live%00_northwind_soccer.json', withKey()), [400, 404]],
    ['raw NUL in the path', get(`/v1/data/${LIVE}\u0000.txt`, withKey()), [400]],
    ['raw NUL in a header', get('/v1/files', `X-API-Key: odf_\u0000\r\n`), [400]],
    ['CR in a header value', get('/v1/files', 'X-API-Key: a\rb\r\n'), [400]],
    ['overlong UTF-8', get('/v1/data/%C0%AE%C0%AE%2Fetc', withKey()), [400, 404]],
    ['bad percent-encoding', get('/v1/data/%E0%A4%A', withKey()), [400]],
    ['raw non-ASCII in the path', Buffer.from(`GET /v1/data/\u00e9t\u00e9.json HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`, 'utf8'), [400, 404]],
    ['space in the path', 'GET /v1/data/a b.json HTTP/1.1\r\nHost: localhost\r\n\r\n', [400]],
    ['huge header', get('/v1/files', `X-Big: ${'a'.repeat(20_000)}\r\n`), [431]],
    ['many headers', get('/v1/files', Array.from({ length: 2500 }, (_, i) => `X-H${i}: v\r\n`).join('')), [431]],
    ['huge key', get('/v1/files', `X-API-Key: ${'k'.repeat(12_000)}\r\n`), [401, 431]],
    ['over-long URL', get(`/v1/data/${'a'.repeat(20_000)}`), [414]],
    ['long URL, under the header limit', get(`/v1/data/${'a'.repeat(8000)}`, withKey()), [404, 414]],
    ['long query', get(`/v1/files?${'q=1&'.repeat(2000)}`, withKey()), [200]],
    ['PROPFIND', `PROPFIND /v1/files HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`, [405]],
    ['TRACE', `TRACE /v1/data/${LIVE} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`, [405]],
    ['OPTIONS', `OPTIONS /v1/files HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`, [405]],
    ['OPTIONS *', `OPTIONS * HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`, [404, 405]],
    ['DELETE', `DELETE /v1/data/${LIVE} HTTP/1.1\r\nHost: localhost\r\n${withKey()}Connection: close\r\n\r\n`, [405]],
    [
      'PUT with a body, without a key (PUT /v1/data publishes, for publisher keys only)',
      `PUT /v1/data/${LIVE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
      [401],
    ],
    [
      'PUT with a body, a reading key',
      `PUT /v1/data/${LIVE} HTTP/1.1\r\nHost: localhost\r\n${withKey()}Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
      [403],
    ],
    ['PUT elsewhere', `PUT /v1/files HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`, [405]],
    [
      'POST, body too large',
      `POST /v1/files HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n${'a'.repeat(1000)}`,
      [405, 413],
    ],
    [
      'POST, Expect: 100-continue',
      `POST /v1/files HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello`,
      [405, 413, 417],
    ],
    ['POST to the OpenAPI document', `POST /v1/openapi.json HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`, [405]],
    ['POST to a history path', `POST /v1/history/${LIVE} HTTP/1.1\r\nHost: localhost\r\n${withKey()}Connection: close\r\n\r\n`, [405]],
    ['DELETE of a history version', `DELETE /v1/history/${LIVE}/${'0'.repeat(32)} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`, [405]],
    ['HEAD of the change stream (GET only)', `HEAD /v1/stream HTTP/1.1\r\nHost: localhost\r\n${withKey()}Connection: close\r\n\r\n`, [405]],
    ['POST to the change stream', `POST /v1/stream HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`, [405]],
    [
      'PUT with a Content-Type that does not parse, without a key: the key is checked first',
      `PUT /v1/data/${LIVE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: ;;;\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
      [401],
    ],
    ['CONNECT', 'CONNECT internal.example:443 HTTP/1.1\r\nHost: internal.example:443\r\n\r\n', [405]],
    ['unknown method', 'FOO /v1/files HTTP/1.1\r\nHost: localhost\r\n\r\n', [400, 405]],
    ['lower-case method', 'get /v1/files HTTP/1.1\r\nHost: localhost\r\n\r\n', [400]],
    [
      'WebSocket upgrade',
      get('/v1/files', 'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n'),
      [400, 404, 426],
    ],
    [
      'h2c upgrade',
      'GET /v1/files HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n',
      [400, 404, 426],
    ],
    ['HTTP/2 preface on HTTP/1', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', [400]],
    ['unknown HTTP version', 'GET /v1/files HTTP/9.9\r\nHost: localhost\r\n\r\n', [400]],
    ['no Host in HTTP/1.1', 'GET /v1/files HTTP/1.1\r\nConnection: close\r\n\r\n', [400]],
    ['two Host headers', 'GET /v1/files HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n', [400, 401]],
    ['obs-fold header', 'GET /v1/files HTTP/1.1\r\nHost: localhost\r\nX-A: b\r\n  c\r\nConnection: close\r\n\r\n', [400]],
    [
      'Content-Length and Transfer-Encoding',
      'POST /v1/files HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      [400],
    ],
    ['bad Content-Length', 'POST /v1/files HTTP/1.1\r\nHost: localhost\r\nContent-Length: -1\r\n\r\n', [400]],
    ['absolute-form target', get(`http://internal.example/v1/data/${LIVE}`, withKey()), [400, 404]],
    ['key in the query instead of the header', get(`/v1/files?api_key=${key}`), [401]],
    ['unknown path', get('/v2/files', withKey()), [404]],
    ['double slash', get('//v1/files', withKey()), [404]],
    ['trailing slash', get('/v1/files/', withKey()), [404]],
    ['matrix parameter', get('/v1/files;jsessionid=1', withKey()), [404]],
    ['admin traversal', get('/admin/queues/../../../etc/passwd'), [403, 404]],
    ['prototype name', get('/v1/data/__proto__', withKey()), [404]],
    ['constructor name', get('/v1/data/constructor', withKey()), [404]],
    ['HTTP/1.0 without Host', 'GET /v1/files HTTP/1.0\r\n\r\n', [401]],
  ];

  it('answers every hostile request with a 4xx problem, no stack trace, no internal path', async () => {
    const failures: string[] = [];
    for (const [name, request, allowed] of table()) {
      const res = await raw(port, request);
      const problems: string[] = [];
      if (!allowed.includes(res.status)) problems.push(`status ${res.status}, expected ${allowed.join('/')}`);
      if (res.status >= 500 || res.status === 0) problems.push(`no 4xx answer: ${JSON.stringify(res.raw.slice(0, 120))}`);
      if (res.status >= 400) {
        if (!/\r\ncontent-type: application\/problem\+json/i.test(res.head)) problems.push('not problem+json');
        else if (request.toString().startsWith('HEAD ')) {
          // A HEAD answer has no body.
          if (res.body !== '') problems.push(`a body to HEAD: ${res.body.slice(0, 80)}`);
        } else {
          try {
            const body = JSON.parse(res.body) as Record<string, unknown>;
            if (body.status !== res.status || Object.keys(body).sort().join() !== 'detail,status,title,type') problems.push(`body ${res.body}`);
          } catch {
            problems.push(`body is not JSON: ${res.body.slice(0, 80)}`);
          }
        }
      }
      const text = res.raw;
      for (const leak of [ROOT, dataDir, 'node_modules', 'node:internal', '/dist/', 'Error:']) if (text.includes(leak)) problems.push(`leaks ${leak}`);
      if (/\n\s+at .+:\d+:\d+/.test(text)) problems.push('stack trace');
      if (problems.length) failures.push(`${name}: ${problems.join('; ')}`);
    }
    expect(failures).toEqual([]);
  }, 30_000);

  it('is still up, logged no failure and never a key', async () => {
    expect((await raw(port, get('/healthz'))).status).toBe(200);
    expect(svc.proc.exitCode).toBeNull();
    expect(svc.logs.filter((l) => (l.level ?? 0) >= 50)).toEqual([]);
    expect(JSON.stringify(svc.logs)).not.toContain(key);
  });

  it('keeps connections alive for a bounded time', async () => {
    const res = await raw(port, `GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    expect(res.status).toBe(200);
    expect(res.head).toMatch(/\r\nKeep-Alive: timeout=72, max=10000/i);
  });

  it('with trust_proxy off, X-Forwarded-For does not dodge the failed-authentication limit (20 a minute)', async () => {
    let locked = 0;
    for (let i = 1; i <= 25 && !locked; i++) {
      const res = await raw(port, get('/v1/files', `X-API-Key: odf_${String(i).padStart(43, 'z')}\r\nX-Forwarded-For: 203.0.113.${i}\r\n`));
      expect([401, 429]).toContain(res.status);
      if (res.status === 429) locked = i;
    }
    expect(locked).toBeGreaterThan(1);
    expect(locked).toBeLessThanOrEqual(21);
    const again = await raw(port, get('/v1/files', `X-API-Key: odf_${'y'.repeat(43)}\r\nX-Forwarded-For: 198.51.100.200\r\n`));
    expect(again.status).toBe(429);
    expect(again.head).toMatch(/\r\nretry-after: \d+/i);
    // Only failing attempts are refused: a valid key from the locked-out address is served.
    expect((await raw(port, get('/v1/files', `${withKey()}X-Forwarded-For: 198.51.100.200\r\n`))).status).toBe(200);
  });
});

describe('edge limits in process', () => {
  let fx: ReaderFixture;
  beforeAll(async () => {
    fx = await createReaderFixture('edge-limits');
  });
  afterAll(async () => {
    await fx?.cleanup();
  });

  async function app(edge: EdgeLimits, pressure: PressureLimits) {
    const subscriber = createRedis(TEST_REDIS_URL, 'subscriber', `${fx.prefix}-sub`);
    subscriber.on('error', () => undefined);
    const state = await createReaderState({
      config: fx.config,
      redis: fx.redis,
      subscriber,
      store: fx.store,
      catalog: createCatalog(fx.redis, fx.keys),
      log: fx.log,
      registry: fx.registry,
    });
    const a = await buildReaderApp({ config: fx.config, redis: fx.redis, store: fx.store, log: fx.log, state, edge, pressure });
    return {
      app: a,
      async close() {
        await a.close();
        await state.close();
        subscriber.disconnect();
      },
    };
  }

  it('a request whose headers never end gets 408 and is closed (slow loris)', async () => {
    const r = await app({ headersTimeoutMs: 300, requestTimeoutMs: 1000 }, {});
    try {
      const address = await r.app.listen({ host: '127.0.0.1', port: 0 });
      const started = Date.now();
      const res = await raw(Number(new URL(address).port), 'GET /v1/files HTTP/1.1\r\nHost: localhost\r\nX-Slow: 1\r\n', 5000);
      expect(res.status).toBe(408);
      expect(res.head).toMatch(/\r\ncontent-type: application\/problem\+json/i);
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      await r.close();
    }
  });

  it('overloaded: 503 problem with Retry-After, except /healthz', async () => {
    const r = await app({}, { maxHeapUsedBytes: 1, sampleIntervalMs: 10, retryAfterS: 7 });
    try {
      await new Promise((res) => setTimeout(res, 100));
      for (const url of ['/v1/files', `/v1/data/${LIVE}`, '/v1/openapi.json', '/readyz']) {
        const res = await r.app.inject({ url, headers: { 'x-api-key': 'whatever' } });
        expect(res.statusCode, url).toBe(503);
        expect(res.headers['retry-after']).toBe('7');
        expect(res.headers['content-type']).toBe('application/problem+json');
        expect(res.json()).toMatchObject({ status: 503, type: 'https://oddsfiles.dev/problems/unavailable' });
      }
      expect((await r.app.inject({ url: '/healthz' })).statusCode).toBe(200);
      expect(fx.logLines.filter((l) => l.includes('overloaded')).length).toBe(1);
      expect(fx.logLines.some((l) => l.includes('"request failed"'))).toBe(false);
    } finally {
      await r.close();
    }
  });
});
