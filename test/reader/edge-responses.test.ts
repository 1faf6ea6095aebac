/**
 * Every response of the reader gets its request line and its count in the metrics, also those
 * answered before Fastify routes the request (a URL that cannot be decoded, a request Node's parser
 * refuses: header block too large, request line too long, unparseable; CONNECT and Upgrade) and
 * those Fastify answers from its 404 lane (a body it cannot parse, a missing Host, a body over the
 * limit). The reader is started as `oddsfiles start` starts it (startReader, with metrics), at
 * `reader.request_log: all` and at `errors`; requests are written byte for byte on a socket.
 */
import { createConnection } from 'node:net';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.js';
import { registerOps } from '../../src/ops/ops-plugin.js';
import { createMetrics, type Metrics } from '../../src/ops/metrics.js';
import { startReader, type RunningReader } from '../../src/reader/index.js';
import { createRedis } from '../../src/redis/connect.js';
import { rawRequest } from '../helpers/raw-http.js';
import { createReaderFixture, IN_TEST_PRESSURE, type ReaderFixture } from '../helpers/reader-fixture.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';

const LIVE = 'site_live_northwind_soccer.json';

interface Started {
  readonly reader: RunningReader;
  readonly metrics: Metrics;
  readonly port: number;
}

let fx: ReaderFixture;
let key = '';
const connections: Redis[] = [];
const readers: Record<'all' | 'errors', Started> = {} as Record<'all' | 'errors', Started>;

async function start(requestLog: 'all' | 'errors'): Promise<Started> {
  const config: Config = { ...fx.config, reader: { ...fx.config.reader, requestLog } };
  const redis = createRedis(TEST_REDIS_URL, 'client', `${fx.prefix}-${requestLog}-client`);
  const subscriber = createRedis(TEST_REDIS_URL, 'subscriber', `${fx.prefix}-${requestLog}-sub`);
  for (const c of [redis, subscriber]) {
    c.on('error', () => undefined);
    connections.push(c);
  }
  const metrics = createMetrics({ defaultMetrics: false });
  const reader = await startReader({
    config,
    redis,
    subscriber,
    store: fx.store,
    catalog: fx.catalog,
    log: fx.log,
    registry: fx.registry,
    metrics,
    register: (app) => registerOps(app, { config, metrics }),
    pressure: IN_TEST_PRESSURE,
  });
  await reader.ready;
  return { reader, metrics, port: Number(new URL(reader.url).port) };
}

/** Every sample of oddsfiles_http_requests_total, as "route method status" → count. */
async function counts(metrics: Metrics): Promise<Map<string, number>> {
  const text = await metrics.render();
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^oddsfiles_http_requests_total\{([^}]*)\} (\S+)$/gm)) {
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
    out.set(`${labels.route} ${labels.method} ${labels.status}`, Number(m[2]));
  }
  return out;
}

const requestLines = (from: number) =>
  fx.logLines
    .slice(from)
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === 'request' || l.msg === 'request errored');

/** Send `request`, then wait for its request line (and a little longer, for any second one). */
async function observe(s: Started, request: string) {
  const linesBefore = fx.logLines.length;
  const countsBefore = await counts(s.metrics);
  // Connection: close (where the request is parsed at all), so that the answer ends with the socket.
  const res = await rawRequest(s.port, /connection:/i.test(request) ? request : request.replace('\r\n', '\r\nConnection: close\r\n'));
  for (let i = 0; i < 2000 && requestLines(linesBefore).length === 0; i++) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 50));
  const after = await counts(s.metrics);
  const added = new Map<string, number>();
  for (const [series, n] of after) {
    const d = n - (countsBefore.get(series) ?? 0);
    if (d !== 0) added.set(series, d);
  }
  return { res, lines: requestLines(linesBefore), counted: Object.fromEntries(added) };
}

const BIG_HEADER = 'x'.repeat(20 * 1024);
const LONG_NAME = 'a'.repeat(20 * 1024);

/** [what, request, status, method (line and label), url in the line, route label] */
const CASES: [string, string, number, string, string | RegExp, string?][] = [
  ['a bad percent-encoding', 'GET /v1/data/% HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {key}\r\n\r\n', 400, 'GET', '/v1/data/%'],
  ['a truncated UTF-8 escape', 'GET /v1/data/%E0%A4%A HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {key}\r\n\r\n', 400, 'GET', '/v1/data/%E0%A4%A'],
  ['a header block over the limit (431)', `GET /v1/files HTTP/1.1\r\nHost: localhost\r\nX-Big: ${BIG_HEADER}\r\n\r\n`, 431, 'GET', '/v1/files'],
  ['a request line over the limit (414)', `GET /v1/data/${LONG_NAME} HTTP/1.1\r\nHost: localhost\r\n\r\n`, 414, 'GET', /^\/v1\/data\/a+…$/],
  ['a request Node cannot parse', 'GET /v1/files HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n', 400, 'GET', '/v1/files'],
  [
    'a malformed JSON body on an unknown path',
    'POST /nowhere HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\n{bad',
    400,
    'POST',
    '/nowhere',
  ],
  [
    'a malformed JSON body on an API path (405)',
    'POST /v1/files HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\n{bad',
    405,
    'POST',
    '/v1/files',
  ],
  [
    'a body over the limit on an unknown path',
    `POST /nowhere HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${20 * 1024}\r\n\r\n${'1'.repeat(20 * 1024)}`,
    413,
    'POST',
    '/nowhere',
  ],
  ['an HTTP/1.1 request without Host', 'GET /v1/files HTTP/1.1\r\n\r\n', 400, 'GET', '/v1/files', '/v1/files'],
  ['CONNECT', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 405, 'CONNECT', 'example.com:443'],
  ['an Upgrade request', 'GET /v1/files HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n', 404, 'GET', '/v1/files'],
];

beforeAll(async () => {
  fx = await createReaderFixture('edge-responses');
  await fx.publish(LIVE, { bookmaker: 'northwind', sport: 'soccer', events: [] });
  key = (await fx.keyStore.create({ name: 'pro', plan: 'pro' })).key;
  readers.all = await start('all');
  readers.errors = await start('errors');
});

afterAll(async () => {
  for (const s of Object.values(readers)) await s.reader.close();
  for (const c of connections) c.disconnect();
  await fx?.cleanup();
});

describe.each(['all', 'errors'] as const)('reader.request_log: %s', (mode) => {
  it.each(CASES)('%s: one request line and one count', async (_what, template, status, method, url, route = 'unmatched') => {
    const s = readers[mode];
    const { res, lines, counted } = await observe(s, template.replace('{key}', key));
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(res.body.toString('utf8'))).toMatchObject({ status });
    expect(lines, JSON.stringify(lines)).toHaveLength(1);
    const line = lines[0]!;
    expect(line.msg).toBe('request');
    expect(line.status).toBe(status);
    expect(line.method).toBe(method);
    if (typeof url === 'string') expect(line.url).toBe(url);
    else expect(String(line.url)).toMatch(url);
    expect(String(line.url).length).toBeLessThan(300);
    expect(line.reqId).toMatch(/^req-[0-9a-z]+$/);
    expect(line.ip).toBe('127.0.0.1');
    const label = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'].includes(method) ? method : 'OTHER';
    expect(counted).toEqual({ [`${route} ${label} ${status}`]: 1 });
    // No key in the line, ever.
    expect(JSON.stringify(line)).not.toContain(key);
  });

  it('a normal request is still counted once, and logged only at "all"', async () => {
    const s = readers[mode];
    const { res, lines, counted } = await observe(s, `GET /v1/data/${LIVE} HTTP/1.1\r\nHost: localhost\r\nX-API-Key: ${key}\r\n\r\n`);
    expect(res.status).toBe(200);
    expect(lines).toHaveLength(mode === 'all' ? 1 : 0);
    expect(counted).toEqual({ '/v1/data/* GET 200': 1 });
  });
});

describe('a refusal before routing keeps the connection', () => {
  it('a bad URL, then a good request on the same keep-alive connection: two lines, two counts', async () => {
    const s = readers.all;
    const before = fx.logLines.length;
    const countsBefore = await counts(s.metrics);
    const text = await new Promise<string>((resolve, reject) => {
      const socket = createConnection(s.port, '127.0.0.1', () => {
        socket.write(
          `GET /v1/data/%zz HTTP/1.1\r\nHost: localhost\r\nX-API-Key: ${key}\r\n\r\nGET /v1/files HTTP/1.1\r\nHost: localhost\r\nX-API-Key: ${key}\r\nConnection: close\r\n\r\n`,
        );
      });
      let out = '';
      socket.on('data', (d) => (out += d.toString('latin1')));
      socket.on('close', () => resolve(out));
      socket.on('error', reject);
    });
    expect(text.match(/HTTP\/1\.1 \d{3}/g), text).toEqual(['HTTP/1.1 400', 'HTTP/1.1 200']);
    await new Promise((r) => setTimeout(r, 50));
    // (In either order: a pipelined answer may be written before the first one is seen sent.)
    expect(
      requestLines(before)
        .map((l) => [l.url, l.status])
        .sort(),
    ).toEqual([
      ['/v1/data/%zz', 400],
      ['/v1/files', 200],
    ]);
    const after = await counts(s.metrics);
    expect((after.get('unmatched GET 400') ?? 0) - (countsBefore.get('unmatched GET 400') ?? 0)).toBe(1);
    expect((after.get('/v1/files GET 200') ?? 0) - (countsBefore.get('/v1/files GET 200') ?? 0)).toBe(1);
  });
});
