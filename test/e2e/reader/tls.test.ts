/**
 * HTTPS: with TLS_CERT_FILE and TLS_KEY_FILE, `oddsfiles start` serves TLS only, HTTP/2 by ALPN
 * and HTTP/1.1 for clients that do not offer h2, with a certificate made here by the openssl CLI.
 * A plaintext request on that port gets no HTTP answer; a client that does not trust the
 * certificate is refused by the handshake; the edge answers stay problems over TLS too.
 */
import { writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { connect as h2connect, constants as h2 } from 'node:http2';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { drop, tinyDoc } from '../../helpers/drops.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';
import { selfSignedCert } from '../../helpers/tls-cert.js';

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  readonly alpn: string | false | null | undefined;
}

describe('HTTPS with TLS_CERT_FILE and TLS_KEY_FILE', () => {
  const prefix = uniquePrefix('tls');
  let svc: RunningOddsfiles;
  let ca: Buffer;
  let key: string;
  let port: number;
  let inbox: string;

  const https1 = (path: string, headers: Record<string, string> = {}, trust: Buffer | undefined = ca, alpn: string[] | null = ['http/1.1']): Promise<Answer> =>
    new Promise((resolve, reject) => {
      const req = httpsRequest(
        { host: '127.0.0.1', port, path, headers, ca: trust, servername: 'localhost', agent: false, ...(alpn ? { ALPNProtocols: alpn } : {}) },
        (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (c: string) => (body += c));
          res.on('end', () =>
            resolve({ status: res.statusCode!, headers: res.headers, body, alpn: (res.socket as { alpnProtocol?: string | false }).alpnProtocol }),
          );
        },
      );
      req.on('error', reject);
      req.end();
    });

  const http2 = (path: string, headers: Record<string, string> = {}): Promise<Answer> =>
    new Promise((resolve, reject) => {
      const session = h2connect(`https://localhost:${port}`, { ca });
      session.on('error', reject);
      const stream = session.request({ [h2.HTTP2_HEADER_PATH]: path, ...headers });
      let body = '';
      let head: Record<string, string | string[] | undefined> = {};
      stream.setEncoding('utf8');
      stream.on('response', (h) => (head = h as typeof head));
      stream.on('data', (c: string) => (body += c));
      stream.on('end', () => {
        resolve({ status: Number(head[':status']), headers: head, body, alpn: session.alpnProtocol });
        session.close();
      });
      stream.on('error', reject);
      stream.end();
    });

  beforeAll(async () => {
    const dataDir = await makeDataDir('tls');
    inbox = join(dataDir, 'inbox');
    const cert = selfSignedCert(dataDir);
    const { certFile, keyFile } = cert;
    ca = cert.ca;
    writeFileSync(join(dataDir, 'oddsfiles.yaml'), 'plans:\n  pro: { allow: ["*"], rate: { max: 100, per: 1m } }\n');
    const env = baseEnv(dataDir, prefix, { TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile });
    svc = await startOddsfiles(env);
    port = Number(new URL(svc.url!).port);
    const res = await runCli(env, ['keys', 'create', '--name', 'tls', '--plan', 'pro']);
    expect(res.code, res.stderr).toBe(0);
    key = res.stdout.trim();
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it('announces an https:// address', () => {
    expect(svc.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  });

  it('serves HTTP/1.1 over TLS to a client that offers only http/1.1', async () => {
    const health = await https1('/healthz');
    expect(health.status).toBe(200);
    expect(health.alpn).toBe('http/1.1');
    const files = await https1('/v1/files', { 'x-api-key': key });
    expect(files.status).toBe(200);
    expect(JSON.parse(files.body)).toEqual({ files: [] });
    expect(files.headers['ratelimit-policy']).toBe('"pro";q=100;w=60');
    expect((await https1('/v1/files')).status).toBe(401);
    // A client offering no ALPN at all (node:https by default) gets HTTP/1.1 too.
    const noAlpn = await https1('/healthz', {}, ca, null);
    expect(noAlpn.status).toBe(200);
    expect(noAlpn.alpn).toBe(false);
  });

  it('negotiates HTTP/2 by ALPN', async () => {
    const files = await http2('/v1/files', { 'x-api-key': key });
    expect(files.alpn).toBe('h2');
    expect(files.status).toBe(200);
    expect(files.headers['content-type']).toMatch(/^application\/json/);
    expect(files.headers['ratelimit']).toMatch(/^"pro";r=\d+;t=\d+$/);
    const missing = await http2('/v1/data/site_live_nobody_soccer.json', { 'x-api-key': key });
    expect(missing.status).toBe(404);
    expect(missing.headers['content-type']).toBe('application/problem+json');
    expect((await http2('/v1/openapi.json')).status).toBe(200);
    const wrongMethod = await http2('/v1/files', { [h2.HTTP2_HEADER_METHOD]: 'DELETE' });
    expect(wrongMethod.status).toBe(405);
  });

  it('pushes changes over HTTP/2 as server-sent events', async () => {
    const session = h2connect(`https://localhost:${port}`, { ca });
    try {
      const stream = session.request({ [h2.HTTP2_HEADER_PATH]: '/v1/stream', 'x-api-key': key });
      let head: Record<string, unknown> = {};
      let body = '';
      stream.setEncoding('utf8');
      stream.on('response', (h) => (head = h));
      stream.on('data', (c: string) => (body += c));
      await waitFor(async () => head[':status'] !== undefined, 5000, 'the stream head');
      expect(head[':status']).toBe(200);
      expect(head['content-type']).toMatch(/^text\/event-stream/);
      await drop(inbox, 'site_live_northwind_soccer.json', tinyDoc('northwind', 'soccer', new Date().toISOString()));
      await waitFor(
        async () => /event: change\ndata: \{"position":\d+,"filename":"site_live_northwind_soccer.json"/.test(body),
        10_000,
        'a change event over HTTP/2',
      );
      stream.close();
    } finally {
      session.close();
    }
  });

  it('pushes changes over HTTP/1.1 on TLS, from the socket the stream took', async () => {
    let text = '';
    const socket = tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost', ALPNProtocols: ['http/1.1'] }, () =>
      socket.write(`GET /v1/stream HTTP/1.1\r\nHost: localhost\r\nX-API-Key: ${key}\r\n\r\n`),
    );
    socket.setEncoding('utf8').on('data', (c: string) => (text += c));
    try {
      await waitFor(async () => /^HTTP\/1\.1 200[^]*\r\n\r\nretry: \d+\n\n/.test(text), 5000, 'the stream head');
      expect(text).toMatch(/content-type: text\/event-stream/i);
      expect(text).not.toMatch(/transfer-encoding/i);
      // Bytes after the request are dropped, not answered.
      socket.write('GET /v1/files HTTP/1.1\r\nHost: localhost\r\n\r\n');
      await drop(inbox, 'site_live_northwind_soccer.json', tinyDoc('northwind', 'soccer', new Date().toISOString()));
      await waitFor(
        async () => /event: change\ndata: \{"position":\d+,"filename":"site_live_northwind_soccer.json"/.test(text),
        10_000,
        'a change event over HTTP/1.1 on TLS',
      );
      expect(text.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    } finally {
      socket.destroy();
    }
  });

  it('answers plain HTTP on the TLS port with nothing HTTP', async () => {
    const out = await new Promise<string>((resolve) => {
      const socket = netConnect(port, '127.0.0.1', () => socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n'));
      let data = '';
      socket.on('data', (d) => (data += d.toString('latin1')));
      socket.on('close', () => resolve(data));
      socket.on('error', () => resolve(data));
      socket.setTimeout(5000, () => socket.destroy());
    });
    expect(out.startsWith('HTTP/')).toBe(false);
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  });

  it('a client that does not trust the certificate is refused', async () => {
    await expect(https1('/healthz', {}, Buffer.from(''))).rejects.toThrow(/self[- ]signed|certificate/i);
  });

  it('edge answers stay problems over TLS (huge header → 431, over-long URL → 414); keep-alive is bounded', async () => {
    const raw = (text: string, until?: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost', ALPNProtocols: ['http/1.1'] }, () => socket.write(text));
        let data = '';
        socket.on('data', (d) => {
          data += d.toString('latin1');
          if (until && data.includes(until)) socket.destroy();
        });
        socket.on('close', () => resolve(data));
        socket.on('error', (err) => (data ? resolve(data) : reject(err)));
      });
    const big = await raw(`GET /v1/files HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(big).toMatch(/^HTTP\/1\.1 431 /);
    expect(big).toContain('application/problem+json');
    const long = await raw(`GET /v1/data/${'a'.repeat(40_000)} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    expect(long).toMatch(/^HTTP\/1\.1 414 /);
    const kept = await raw('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n', '"status":"ok"}');
    expect(kept).toMatch(/^HTTP\/1\.1 200 /);
    expect(kept).toMatch(/\r\nKeep-Alive: timeout=72, max=10000\r\n/i);
  });
});
