/**
 * Fault 7: hostile requests against the running reader. A generated table of request targets
 * (traversal in every encoding: ../, %2e%2e, %252e, overlong UTF-8 %c0%ae / %c0%af / %e0%80%ae,
 * backslashes, NUL bytes, store keys, very long names, odd prefixes), methods (GET, HEAD, and the
 * unusual ones), and headers (keys good, bad, huge, doubled; codings; conditionals; framing
 * tricks), each written byte for byte on a socket. The reader must never answer 5xx, and every 200
 * must be a file of the catalog (its bytes hash to a published version), a list of catalog names,
 * or a health answer: never /etc/passwd, the environment, the manifest or a store object by key.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateCorpus } from '../fixtures/corpus.js';
import { createApiKey, freePort, httpGet, readCatalogAt, sha256, writeFaultConfig } from '../helpers/faults.js';
import { drop, pendingDrops } from '../helpers/drops.js';
import { rawRequest, type RawResponse } from '../helpers/raw-http.js';
import { TEST_REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';

const VALID = 'site_live_northwind_soccer.json';

/** Names to ask for after a prefix, raw (already encoded as they go on the wire). */
function hostileNames(objectKey: string): string[] {
  const passwd = [
    '../../etc/passwd',
    '../../../../../../etc/passwd',
    '..%2f..%2f..%2fetc%2fpasswd',
    '..%2F..%2F..%2Fetc%2Fpasswd',
    '%2e%2e/%2e%2e/%2e%2e/etc/passwd',
    '%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd',
    '%252e%252e%252f%252e%252e%252fetc%252fpasswd',
    '..%252f..%252f..%252fetc%252fpasswd',
    '%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd',
    '..%c0%af..%c0%af..%c0%afetc%c0%afpasswd',
    '%e0%80%ae%e0%80%ae/%e0%80%ae%e0%80%ae/etc/passwd',
    '%c0%2e%c0%2e/etc/passwd',
    '..\\..\\..\\etc\\passwd',
    '..%5c..%5c..%5cetc%5cpasswd',
    '%u002e%u002e/%u002e%u002e/etc/passwd',
    '....//....//etc/passwd',
    '..;/..;/etc/passwd',
    '/etc/passwd',
    '//etc/passwd',
    '%2fetc%2fpasswd',
    'file:///etc/passwd',
  ];
  const store = [
    'manifest.json',
    '../manifest.json',
    '..%2fmanifest.json',
    '../../store/manifest.json',
    objectKey,
    `../${objectKey}`,
    `..%2f${objectKey.replaceAll('/', '%2f')}`,
    '.tmp',
    '../inbox/.processing',
    '.processing',
    '../../var/redis/redis.url',
    '/proc/self/environ',
    '..%2f..%2f..%2fproc%2fself%2fenviron',
  ];
  const nul = [`${VALID}%00`, `${VALID}%00.txt`, `%00${VALID}`, '%00', `${VALID.slice(0, 10)}%00${VALID.slice(10)}`];
  const variants = [
    VALID,
    `./${VALID}`,
    `.%2f${VALID}`,
    `${VALID}/`,
    `${VALID}/.`,
    `${VALID}/..`,
    `x/../${VALID}`,
    `x%2f..%2f${VALID}`,
    `%2e/${VALID}`,
    VALID.toUpperCase(),
    `${VALID};x=1`,
    `${VALID}?x=../../etc/passwd`,
    `${VALID}?`,
    `${VALID}#frag`,
    `${VALID}%23x`,
    `${VALID}%20`,
    ` ${VALID}`.replace(' ', '%20'),
    encodeURIComponent(VALID).replace('_', '%5F'),
    `site_live_northwind_soccer%2ejson`,
    `site_live_northwind_soccer.json.`,
    `site_live_northwind_soccer.json~`,
    `site_live_northwind_soccer.JSON`,
  ];
  const odd = [
    '',
    '.',
    '..',
    '...',
    '%',
    '%%',
    '%zz',
    '%ff%fe%fd',
    '%c0',
    '%80',
    '%F0%9F%93%88',
    'caf%C3%A9.json',
    'x'.repeat(200),
    'x'.repeat(201),
    'x'.repeat(5000),
    `${'a/'.repeat(300)}x`,
    '%2e'.repeat(100),
    '*',
    '?',
    '~',
    '$HOME',
    '${jndi:ldap://x}',
    '<script>',
    '\'"',
    '{}',
    '[]',
  ];
  return [...passwd, ...store, ...nul, ...variants, ...odd];
}

const PREFIXES = [
  '/v1/data/',
  '/v1/data//',
  '/v1//data/',
  '/V1/data/',
  '/v1/DATA/',
  '/v1/data/./',
  '/v1/data/x/../',
  '/v1/%64ata/',
  '/v1/data%2f',
  '/v1/files/',
  '/',
  '/v1/',
];

describe('fault: hostile requests against the reader', () => {
  const prefix = uniquePrefix('faults-requests');
  let svc: RunningOddsfiles;
  let port: number;
  let key: string;
  const publishedShas = new Set<string>();
  const publishedNames = new Set<string>();
  let objectKey = '';

  beforeAll(async () => {
    const dataDir = await makeDataDir('faults-requests');
    const inbox = join(dataDir, 'inbox');
    port = await freePort();
    const env = baseEnv(dataDir, prefix, { ODDSFILES_CONFIG: await writeFaultConfig(dataDir), PORT: String(port) });
    key = await createApiKey(env);
    svc = await startOddsfiles(env);
    const valid = generateCorpus().filter((c) => c.group === 'valid');
    await Promise.all(valid.map((c) => drop(inbox, c.filename, c.bytes)));
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 30_000, 'the corpus published');
    for (const c of valid) {
      publishedShas.add(sha256(c.bytes));
      publishedNames.add(c.filename);
    }
    await waitFor(
      async () => {
        for (const c of valid) if ((await httpGet(`http://127.0.0.1:${port}/v1/data/${c.filename}`, { 'x-api-key': key })).status !== 200) return false;
        return true;
      },
      30_000,
      'the reader serving the corpus',
    );
    objectKey = (await readCatalogAt(TEST_REDIS_URL, prefix)).get(VALID)!.object;
  }, 90_000);

  afterAll(async () => {
    await svc?.kill();
    await dropPrefix(prefix);
  });

  const problems: string[] = [];
  const served200: string[] = [];
  const statuses: Record<string, number> = {};
  let total = 0;
  /** Send one request and check the answer against the promises. */
  const check = async (label: string, request: Buffer | string, method: string) => {
    const res: RawResponse = await rawRequest(port, request);
    total++;
    statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    const text = res.body.toString('latin1');
    if (res.status >= 500) problems.push(`${label}: ${res.status} ${text.slice(0, 200)}`);
    // Everything the server wrote back (pipelined answers too) is searched for leaks.
    const all = res.raw.toString('latin1');
    if (/root:.*:0:0:|PATH=|"format":1|REDIS|redis:\/\//.test(all)) problems.push(`${label}: leaked something: ${all.slice(0, 120)}`);
    if (res.status === 200) served200.push(label);
    if (res.status === 200 && method === 'GET') {
      const isData = publishedShas.has(sha256(res.body));
      let isList = false;
      try {
        const v = JSON.parse(res.body.toString('utf8')) as { files?: unknown; status?: unknown; openapi?: unknown };
        isList = Array.isArray(v.files) && v.files.every((f) => typeof f === 'string' && publishedNames.has(f));
        isList ||= v.status === 'ok' || typeof v.openapi === 'string';
      } catch {
        /* not JSON */
      }
      if (!isData && !isList) problems.push(`${label}: a 200 that is neither a catalog file nor a list: ${text.slice(0, 120)}`);
    }
    return res;
  };
  const req = (method: string, target: string, headers: Record<string, string> = {}, version = 'HTTP/1.1', body = '') =>
    `${method} ${target} ${version}\r\nHost: 127.0.0.1\r\nX-API-Key: ${key}\r\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('')}Connection: close\r\n\r\n${body}`;

  it('answers every target × method without a 5xx and serves only catalog files', async () => {
    const names = hostileNames(objectKey);
    const targets = PREFIXES.flatMap((p) => names.map((n) => `${p}${n}`));
    const methods = ['GET', 'HEAD'];
    // Requests one after another in a few parallel lanes.
    const jobs = targets.flatMap((t) => methods.map((m) => ({ t, m })));
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < jobs.length) {
          const { t, m } = jobs[next++]!;
          await check(`${m} ${t.slice(0, 120)}`, req(m, t), m);
        }
      }),
    );
    // Unusual methods on a sample of targets.
    for (const m of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'PROPFIND', 'MKCOL', 'FOO', 'get', 'G\u00c9T', 'GET\u0000']) {
      for (const t of ['/v1/data/' + VALID, '/v1/data/../../etc/passwd', '/v1/files', '/', '/healthz']) {
        await check(`${m} ${t}`, req(m, t, { 'Content-Length': '2' }, 'HTTP/1.1', '{}'), m);
      }
    }
    console.info(JSON.stringify({ test: 'faults.hostile-requests', part: 'targets', requests: total, statuses, served200 }));
    expect(problems).toEqual([]);
  }, 240_000);

  it('answers odd headers, framing and request lines without a 5xx', async () => {
    const t = `/v1/data/${VALID}`;
    const cases: [string, string | Buffer][] = [
      ['no key', `GET ${t} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`],
      ['empty key', `GET ${t} HTTP/1.1\r\nHost: x\r\nX-API-Key: \r\nConnection: close\r\n\r\n`],
      ['wrong key', req('GET', t, {}).replace(key, `${key}x`)],
      ['huge key', req('GET', t, {}).replace(key, 'k'.repeat(12_000))],
      ['key with bytes ≥ 0x80', Buffer.from(req('GET', t, {}).replace(key, 'ключ\u00ff'), 'utf8')],
      ['key with NUL', req('GET', t, {}).replace(key, `${key}\u0000`)],
      ['two keys', req('GET', t, { 'X-API-Key': 'wrong' })],
      ['key in lower/upper case name', req('GET', t, {}).replace('X-API-Key', 'x-Api-KEY')],
      ['accept-encoding odd', req('GET', t, { 'Accept-Encoding': 'br;q=abc, gzip;q=-1, *;q=2, identity;q=0' })],
      ['accept-encoding huge', req('GET', t, { 'Accept-Encoding': 'gzip, '.repeat(1500) })],
      ['accept-encoding none acceptable', req('GET', t, { 'Accept-Encoding': 'identity;q=0, *;q=0' })],
      ['if-none-match *', req('GET', t, { 'If-None-Match': '*' })],
      ['if-none-match junk', req('GET', t, { 'If-None-Match': 'W/"x", "', 'If-Modified-Since': 'yesterday' })],
      ['if-none-match huge', req('GET', t, { 'If-None-Match': `"${'a'.repeat(8000)}"` })],
      ['range', req('GET', t, { Range: 'bytes=0-10,5-1,-3' })],
      ['range huge', req('GET', t, { Range: 'bytes=999999999999999999999-' })],
      ['GET with a body', req('GET', t, { 'Content-Length': '5' }, 'HTTP/1.1', 'hello')],
      ['GET with a too large body', req('GET', t, { 'Content-Length': '100000' }, 'HTTP/1.1', 'x'.repeat(100_000))],
      ['bad content-length', req('GET', t, { 'Content-Length': 'abc' })],
      ['two content-lengths', req('GET', t, { 'Content-Length': '0', 'content-length': '5' })],
      ['chunked GET, bad chunk', req('GET', t, { 'Transfer-Encoding': 'chunked' }, 'HTTP/1.1', 'zz\r\nhello\r\n0\r\n\r\n')],
      [
        'CL and TE (smuggling)',
        req('POST', t, { 'Content-Length': '4', 'Transfer-Encoding': 'chunked' }, 'HTTP/1.1', '0\r\n\r\nGET /v1/data/../../etc/passwd HTTP/1.1\r\n\r\n'),
      ],
      ['no host', `GET ${t} HTTP/1.1\r\nX-API-Key: ${key}\r\nConnection: close\r\n\r\n`],
      ['two hosts', req('GET', t, { Host: 'evil.example' })],
      ['HTTP/1.0', `GET ${t} HTTP/1.0\r\nX-API-Key: ${key}\r\n\r\n`],
      ['HTTP/0.9', `GET ${t}\r\n\r\n`],
      ['HTTP/2.0 line', req('GET', t, {}, 'HTTP/2.0')],
      ['HTTP/9.9', req('GET', t, {}, 'HTTP/9.9')],
      ['absolute-form', req('GET', `http://evil.example${t}`)],
      ['absolute-form to passwd', req('GET', 'http://127.0.0.1/v1/data/../../etc/passwd')],
      ['asterisk-form', req('OPTIONS', '*')],
      ['authority-form', req('CONNECT', '127.0.0.1:22')],
      ['bare LF', req('GET', t).replaceAll('\r\n', '\n')],
      ['header without colon', req('GET', t, { 'X-Broken\r\nno colon here': 'x' })],
      ['header with space before colon', `GET ${t} HTTP/1.1\r\nHost: x\r\nX-API-Key : ${key}\r\nConnection: close\r\n\r\n`],
      ['obs-fold', `GET ${t} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${key}\r\n  folded\r\nConnection: close\r\n\r\n`],
      ['header 100 KB', req('GET', t, { 'X-Big': 'b'.repeat(100_000) })],
      ['600 headers', req('GET', t, Object.fromEntries(Array.from({ length: 600 }, (_, i) => [`X-H${i}`, 'v'])))],
      [
        'upgrade to websocket',
        req('GET', t, { Upgrade: 'websocket', Connection: 'Upgrade', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version': '13' }),
      ],
      ['upgrade to h2c', req('GET', t, { Upgrade: 'h2c', 'HTTP2-Settings': 'AAMAAABkAARAAAAAAAIAAAAA' })],
      ['expect 100-continue', req('POST', t, { Expect: '100-continue', 'Content-Length': '2' }, 'HTTP/1.1', '{}')],
      ['expect junk', req('GET', t, { Expect: 'teapot' })],
      ['x-forwarded-for junk', req('GET', t, { 'X-Forwarded-For': '999.1.1.1, <script>, ::::' })],
      ['request line 70 KB', req('GET', `/v1/data/${'y'.repeat(70_000)}`)],
      ['binary garbage', Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 131 + 7) % 256))],
      ['TLS hello on plain port', Buffer.from('16030100a5010000a10303', 'hex')],
      ['HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'],
      ['empty line only', '\r\n\r\n'],
      ['pipelined passwd after a good one', req('GET', t).replace('Connection: close\r\n', '') + req('GET', '/v1/data/%2e%2e/%2e%2e/etc/passwd')],
    ];
    const before = total;
    const seen: Record<string, number> = {};
    for (const [label, raw] of cases) {
      const res = await check(label, raw, 'GET');
      seen[label] = res.status;
    }
    console.info(JSON.stringify({ test: 'faults.hostile-requests', part: 'headers', requests: total - before, statuses: seen }));
    expect(problems).toEqual([]);
    // The reader is still healthy and serving.
    const ok = await rawRequest(port, req('GET', `/v1/data/${VALID}`));
    expect(ok.status).toBe(200);
    expect(svc.proc.exitCode).toBeNull();
  }, 120_000);
});
