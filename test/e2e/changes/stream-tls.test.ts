/**
 * The change feed over TLS, against `oddsfiles start` with a certificate made here by the openssl
 * CLI, for both ways a client may come: HTTP/1.1 on TLS (the stream takes its TLS socket) and
 * HTTP/2 (the stream stays a response of its session). For each: changes arrive, Last-Event-ID
 * resumes after the last one read, a client that stops reading is dropped with its `dropped`
 * event, and a client that goes away (also while changes flow to it; over HTTP/2 by resetting
 * its stream or by closing its connection) leaves no stream or slot held.
 */
import { writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { connect as h2connect, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sleep } from '../../helpers/faults.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, type RunningOddsfiles } from '../../helpers/service.js';
import { selfSignedCert } from '../../helpers/tls-cert.js';

type Transport = 'http/1.1' | 'h2';

/** A stream's client: what it received, and its connection to pause, resume or drop. */
interface TlsStream {
  text(): string;
  ids(): number[];
  until(re: RegExp, timeoutMs?: number): Promise<void>;
  pause(): void;
  resume(): void;
  /** Goes away at once (the connection, or the HTTP/2 stream with RST_STREAM). */
  close(): void;
  /** Its connection goes away (for HTTP/2: the session with every stream on it). */
  drop(): void;
  readonly ended: Promise<void>;
}

describe('the change feed over TLS', () => {
  const prefix = uniquePrefix('e2e-stream-tls');
  let svc: RunningOddsfiles;
  let redis: Redis;
  let ca: Buffer;
  let key: string;
  let port: number;
  const sessions: ClientHttp2Session[] = [];
  const sockets: TLSSocket[] = [];
  const opened: TlsStream[] = [];

  const open = (transport: Transport, headers: Record<string, string> = {}): TlsStream => {
    let text = '';
    const waiters = new Set<() => void>();
    let endedResolve!: () => void;
    const ended = new Promise<void>((r) => (endedResolve = r));
    const onData = (c: string) => {
      text += c;
      for (const w of waiters) w();
    };
    let control: Pick<TlsStream, 'pause' | 'resume' | 'close' | 'drop'>;
    if (transport === 'http/1.1') {
      const lines = Object.entries({ 'x-api-key': key, ...headers }).map(([k, v]) => `${k}: ${v}\r\n`);
      const socket = tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost', ALPNProtocols: ['http/1.1'] }, () =>
        socket.write(`GET /v1/stream HTTP/1.1\r\nHost: localhost\r\n${lines.join('')}\r\n`),
      );
      sockets.push(socket);
      socket.setEncoding('utf8').on('data', onData);
      socket
        .on('end', endedResolve)
        .on('close', endedResolve)
        .on('error', () => undefined);
      control = { pause: () => socket.pause(), resume: () => socket.resume(), close: () => socket.destroy(), drop: () => socket.destroy() };
    } else {
      const session = h2connect(`https://localhost:${port}`, { ca });
      sessions.push(session);
      session.on('error', () => undefined);
      const req: ClientHttp2Stream = session.request({ ':path': '/v1/stream', 'x-api-key': key, ...headers });
      req.setEncoding('utf8').on('data', onData);
      req
        .on('end', endedResolve)
        .on('close', endedResolve)
        .on('error', () => undefined);
      control = { pause: () => req.pause(), resume: () => req.resume(), close: () => req.close(), drop: () => session.destroy() };
    }
    const stream: TlsStream = {
      ...control,
      text: () => text,
      ids: () => [...text.matchAll(/^id: (\d+)\nevent: change\n/gm)].map((m) => Number(m[1])),
      ended,
      until: async (re, timeoutMs = 10_000) => {
        const deadline = Date.now() + timeoutMs;
        while (!re.test(text)) {
          if (Date.now() > deadline) throw new Error(`${re} not received over ${transport}; got ${JSON.stringify(text.slice(-300))}`);
          await sleep(20);
        }
      },
    };
    opened.push(stream);
    return stream;
  };

  const get = (path: string, headers: Record<string, string> = {}): Promise<string> =>
    new Promise((resolve, reject) => {
      const req = httpsRequest({ host: '127.0.0.1', port, path, ca, servername: 'localhost', agent: false, headers }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => (body += c));
        res.on('end', () => resolve(body));
      });
      req.on('error', reject);
      req.end();
    });
  const metric = async (re: RegExp) => Number(re.exec(await get('/metrics'))?.[1] ?? -1);
  const openStreams = () => metric(/^oddsfiles_streams_open(?:\{[^}]*\})? (\d+)$/m);
  const slotsHeld = async () => {
    let n = 0;
    for (const k of await redis.keys(`${prefix}:streams:*`)) n += await redis.zcard(k);
    return n;
  };

  /**
   * Until the reader has read the log up to its last change: a stream opened without a position
   * starts at the reader's, which trails a burst of injected changes for a while on a busy machine.
   */
  const level = async () => {
    const seq = Number(await redis.get(`${prefix}:catalog:seq`));
    await expect.poll(async () => (JSON.parse(await get('/v1/catalog', { 'x-api-key': key })) as { position: number }).position, { timeout: 15_000 }).toBe(seq);
  };

  /** `n` changes straight into the change log (of files this reader does not serve: announced at once); their positions. */
  const inject = async (n: number, pad = 0): Promise<number[]> => {
    const seq = Number(await redis.get(`${prefix}:catalog:seq`));
    const pipe = redis.pipeline();
    for (let i = 1; i <= n; i++) {
      const entry = {
        filename: `site_live_nobody_${seq + i}.json`,
        sha256: (seq + i).toString(16).padStart(64, '0'),
        size: i,
        generatedAt: 'x'.repeat(pad),
        publishedAt: new Date().toISOString(),
        generatedAtMs: 0,
      };
      pipe.xadd(`${prefix}:catalog:log`, `${seq + i}-0`, 'e', JSON.stringify(entry), 'p', '', 't', String(Date.now()));
    }
    pipe.set(`${prefix}:catalog:seq`, String(seq + n));
    await pipe.exec();
    return Array.from({ length: n }, (_, i) => seq + i + 1);
  };

  beforeAll(async () => {
    const dataDir = await makeDataDir('e2e-stream-tls');
    const cert = selfSignedCert(dataDir);
    const { certFile, keyFile } = cert;
    ca = cert.ca;
    writeFileSync(
      join(dataDir, 'oddsfiles.yaml'),
      [
        'plans:',
        '  pro: { allow: ["*"], rate: { max: 1000000, per: 1m }, streams: 1000 }',
        'changes: { heartbeat: 300ms, max_buffered_bytes: 65536 }',
        '',
      ].join('\n'),
    );
    const env = baseEnv(dataDir, prefix, { TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile });
    svc = await startOddsfiles(env);
    port = Number(new URL(svc.url!).port);
    const res = await runCli(env, ['keys', 'create', '--name', 'tls', '--plan', 'pro']);
    expect(res.code, res.stderr).toBe(0);
    key = res.stdout.trim();
    redis = new Redis(TEST_REDIS_URL);
  }, 60_000);

  afterAll(async () => {
    for (const s of sockets) s.destroy();
    for (const s of sessions) s.destroy();
    await svc?.stop();
    redis?.disconnect();
    await dropPrefix(prefix);
  });

  // A test that failed leaves no stream open for the next one.
  afterEach(() => {
    for (const s of opened.splice(0)) s.close();
  });

  describe.each(['http/1.1', 'h2'] as const)('over %s', (transport) => {
    it('ends the streams of clients that go away while changes flow', async () => {
      const streams = Array.from({ length: 20 }, () => open(transport));
      await Promise.all(streams.map((s) => s.until(/retry: \d+\n\n/)));
      const burst = inject(2000, 600);
      // Each goes away as soon as changes reach it, with more on their way.
      await Promise.all(
        streams.map(async (s, i) => {
          await s.until(/^id: \d+\nevent: change\n/m, 15_000);
          if (i % 2 === 0) s.close();
          else s.drop();
        }),
      );
      await burst;
      await expect.poll(openStreams, { timeout: 5000 }).toBe(0);
      await expect.poll(slotsHeld, { timeout: 5000 }).toBe(0);
    }, 60_000);

    it('pushes changes, and resumes with Last-Event-ID after the last one read', async () => {
      await level();
      const first = open(transport);
      await first.until(/retry: \d+\n\n/);
      const sent = await inject(3);
      await first.until(new RegExp(`^id: ${sent[2]}\\n`, 'm'));
      expect(first.ids()).toEqual(sent);
      first.close();
      const missed = await inject(2);
      const resumed = open(transport, { 'last-event-id': String(sent[1]) });
      await resumed.until(new RegExp(`^id: ${missed[1]}\\n`, 'm'));
      expect(resumed.ids()).toEqual([sent[2], ...missed]);
      resumed.close();
      await expect.poll(openStreams, { timeout: 5000 }).toBe(0);
    });

    it('drops a client that stops reading, with its event, and holds nothing of it after', async () => {
      const droppedBefore = await metric(/^oddsfiles_stream_dropped_total(?:\{[^}]*\})? (\d+)$/m);
      const stalled = open(transport);
      await stalled.until(/retry: \d+\n\n/);
      stalled.pause();
      // Far more than the bound (64 KiB) and the transport's windows and buffers.
      await inject(6000, 600);
      await expect
        .poll(() => metric(/^oddsfiles_stream_dropped_total(?:\{[^}]*\})? (\d+)$/m), { timeout: 15_000, interval: 200 })
        .toBe(Math.max(0, droppedBefore) + 1);
      stalled.resume();
      await stalled.until(/event: dropped\ndata: \{"reason":"slow"/, 15_000);
      await stalled.ended;
      await expect.poll(openStreams, { timeout: 5000 }).toBe(0);
      await expect.poll(slotsHeld, { timeout: 5000 }).toBe(0);
    }, 60_000);

    it('ends the stream of a client that goes away, and gives its slot back', async () => {
      const streams = [open(transport), open(transport)];
      await Promise.all(streams.map((s) => s.until(/retry: \d+\n\n/)));
      expect(await openStreams()).toBe(2);
      // One closes its stream (over HTTP/2 a RST_STREAM, its connection kept), one loses its connection.
      streams[0]!.close();
      streams[1]!.drop();
      await expect.poll(openStreams, { timeout: 5000 }).toBe(0);
      await expect.poll(slotsHeld, { timeout: 5000 }).toBe(0);
      // The reader still serves streams on this transport.
      await level();
      const again = open(transport);
      await again.until(/retry: \d+\n\n/);
      const sent = await inject(1);
      await again.until(new RegExp(`^id: ${sent[0]}\\n`, 'm'));
      again.close();
      await expect.poll(openStreams, { timeout: 5000 }).toBe(0);
    });
  });
});
