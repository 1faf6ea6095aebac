/**
 * @oddsfiles/client as a library: installing and importing it brings nothing of the server (its
 * package.json names no dependency, and a fresh Node process importing the built package loads
 * nothing outside it but Node's builtins); its parts: the server-sent events parser, JSON Patch,
 * canonical JSON (against the `canonicalize` package the server uses), the layout that rebuilds
 * a patched file byte for byte, Retry-After and the backoff.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import canonicalize from 'canonicalize';
import fc from 'fast-check';
import jsonpatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { createClient } from '../../packages/client/src/client.js';
import { problemDetail } from '../../packages/client/src/errors.js';
import { safeName } from '../../packages/client/src/mirror/dir.js';
import { runMirror } from '../../packages/client/src/mirror/mirror.js';
import { stateOf } from '../../packages/client/src/mirror/state.js';
import { makeVersion } from '../../packages/client/src/version.js';
import { backoffMs, retryAfterMs } from '../../packages/client/src/http.js';
import { applyPatch, canonical, layoutOf, serialize, type PatchOp } from '../../packages/client/src/json.js';
import { readSse, type SseItem } from '../../packages/client/src/sse.js';
import { spawnTracked } from '../helpers/processes.js';
import { ROOT } from '../helpers/service.js';

const CLIENT = join(ROOT, 'packages/client');
const SERVER_PACKAGES = ['bullmq', 'ioredis', 'fastify', 'chokidar', '@aws-sdk/client-s3'];

function bodyOf(chunks: string[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const s of chunks) c.enqueue(enc.encode(s));
      c.close();
    },
  });
}

async function all(chunks: string[]): Promise<SseItem[]> {
  const out: SseItem[] = [];
  for await (const i of readSse(bodyOf(chunks), 5000)) out.push(i);
  return out;
}

describe('the client package', () => {
  it('depends on nothing of the server, and importing it loads only its own files and Node builtins', async () => {
    const pkg = JSON.parse(readFileSync(join(CLIENT, 'package.json'), 'utf8')) as Record<string, Record<string, string> | undefined>;
    for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies']) {
      for (const name of SERVER_PACKAGES) expect(Object.keys(pkg[field] ?? {}), field).not.toContain(name);
    }
    // A fresh process records every module it resolves, then imports the built package by name.
    const script = `
      import { registerHooks } from 'node:module';
      const seen = [];
      registerHooks({ resolve(spec, ctx, next) { const r = next(spec, ctx); seen.push(r.url); return r; } });
      await import('@oddsfiles/client');
      await import('@oddsfiles/client/mirror');
      console.log(JSON.stringify(seen));
    `;
    const child = spawnTracked(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code, err).toBe(0);
    const seen = JSON.parse(out) as string[];
    expect(seen.length).toBeGreaterThan(5);
    const outside = seen.filter((u) => !u.startsWith('node:') && !u.startsWith(`file://${join(CLIENT, 'dist')}/`));
    expect(outside).toEqual([]);
    for (const name of SERVER_PACKAGES) expect(seen.filter((u) => u.includes(`/node_modules/${name}/`))).toEqual([]);
  });

  it('parses server-sent events as the standard says: CRLF, CR, LF, comments, multi-line data, retry, split chunks', async () => {
    const items = await all([
      ': hi\r\n\r\nretry: 1500\n\nid: 7\r',
      '\nevent: change\ndata: {"a":\ndata: 1}\n\n',
      'data:x\rid: 8\r\r',
      'event: reset\ndata\n\nid: 9\n',
    ]);
    expect(items).toEqual([
      { kind: 'comment' },
      { kind: 'retry', ms: 1500 },
      { kind: 'event', event: 'change', data: '{"a":\n1}', id: '7' },
      { kind: 'event', event: 'message', data: 'x', id: '8' },
      { kind: 'event', event: 'reset', data: '', id: '8' },
    ]);
  });

  it('gives up on an event longer than its bound (a line that never ends, or data lines without end), and reads one just within it', async () => {
    const read = async (chunks: string[]) => {
      const out: SseItem[] = [];
      for await (const i of readSse(bodyOf(chunks), 5000, 1000)) out.push(i);
      return out;
    };
    await expect(read(['data: ', ...Array.from({ length: 20 }, () => 'x'.repeat(100))])).rejects.toThrow(/more than 1000 characters/);
    await expect(read(Array.from({ length: 20 }, () => `data: ${'y'.repeat(90)}\n`))).rejects.toThrow(/more than 1000 characters/);
    const within = 'z'.repeat(900);
    expect(await read([`data: ${within.slice(0, 400)}`, `${within.slice(400)}\r`, '\n\r\n'])).toEqual([
      { kind: 'event', event: 'message', data: within, id: undefined },
    ]);
  });

  it('gives up on a stream flooding comments or empty lines without an event, and not on heartbeats between events', async () => {
    const read = async (chunks: string[]) => {
      const out: SseItem[] = [];
      for await (const i of readSse(bodyOf(chunks), 5000, 100_000, 1000)) out.push(i);
      return out;
    };
    for (const noise of [':\n', '\n', '\r\n', 'x: y\n', 'retry: 5\n'])
      await expect(read(Array.from({ length: 200 }, () => noise.repeat(10))), JSON.stringify(noise)).rejects.toThrow(/characters of comments and empty lines/);
    const beat = ': heartbeat\n'.repeat(50);
    const items = await read(Array.from({ length: 20 }, (_, i) => `${beat}id: ${i}\ndata: {}\n\n`));
    expect(items.filter((i) => i.kind === 'event')).toHaveLength(20);
  });

  it('a flooding stream is reconnected with backoff, not read for ever', async () => {
    let stopped = false;
    // (A fake body is not cancelled by the client's close, as a fetch's is: it ends once the test stops.)
    const flood = () => {
      let cancelled = false;
      return new ReadableStream<Uint8Array>({
        // Each chunk a turn of the loop later, as a socket's would come (and timers still run).
        pull: (c) =>
          new Promise<void>((r) =>
            setImmediate(() => {
              if (cancelled) return r();
              if (stopped) c.close();
              else c.enqueue(new TextEncoder().encode(':\n'.repeat(4096)));
              r();
            }),
          ),
        cancel: () => void (cancelled = true),
      });
    };
    let streams = 0;
    const fake = async (input: string | URL | Request) => {
      if (String(input).includes('v1/catalog')) return Response.json({ position: 1, files: [] });
      streams++;
      return new Response(flood(), { headers: { 'content-type': 'text/event-stream' } });
    };
    const reasons: string[] = [];
    const client = createClient({
      url: 'http://oddsfiles.test/',
      key: 'odf_x',
      fetch: fake as typeof fetch,
      onNotice: (n) => void (n.type === 'reconnect' && reasons.push(n.reason)),
    });
    const run = (async () => {
      for await (const _ of client.changes()) void _;
    })();
    for (let i = 0; i < 100 && reasons.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    client.close();
    stopped = true;
    await run;
    expect(streams).toBe(1);
    expect(reasons[0]).toMatch(/characters of comments and empty lines/);
  });

  it('refuses an answer larger than maxFileBytes, even one that never ends, without holding it', async () => {
    const endless = () =>
      new ReadableStream<Uint8Array>({
        pull: (c) => c.enqueue(new Uint8Array(64 * 1024).fill(32)),
      });
    const catalog = {
      position: 1,
      files: [{ filename: 'site_live_a_soccer.json', etag: '"abc"', generated_at: '2026-11-28T00:00:00Z', published_at: '2026-11-28T00:00:00Z' }],
    };
    const serve = (endlessCatalog: boolean) => async (input: string | URL | Request) => {
      const url = String(input instanceof Request ? input.url : input);
      if (url.includes('v1/catalog'))
        return new Response(endlessCatalog ? endless() : JSON.stringify(catalog), { headers: { 'content-type': 'application/json' } });
      return new Response(endless(), { headers: { 'content-type': 'application/json', etag: '"abc"' } });
    };
    for (const endlessCatalog of [false, true]) {
      const client = createClient({ url: 'http://oddsfiles.test/', key: 'odf_x', fetch: serve(endlessCatalog) as typeof fetch, maxFileBytes: 1024 * 1024 });
      await expect(
        (async () => {
          for await (const _ of client.changes({ follow: false })) void _;
        })(),
      ).rejects.toThrow(/larger than 1048576 bytes/);
      client.close();
    }
  });

  it('writes into its folder only names that cannot leave it or touch its own files', () => {
    for (const ok of ['site_live_bluewater_soccer.json', 'a.json', '0-x_y.json']) expect(safeName(ok), ok).toBe(true);
    const hostile = [
      '../../tmp/pwned.json',
      '/etc/passwd',
      'a/b.json',
      'a\\b.json',
      '.oddsfiles-mirror.json',
      '.oddsfiles-tmp-x',
      '..',
      'x..json',
      'a.json\n',
      'a\u0000.json',
      '',
      'é.json',
    ];
    for (const bad of hostile) expect(safeName(bad), JSON.stringify(bad)).toBe(false);
    for (const notText of [['a.json'], 7, null, { toString: () => 'a.json' }]) expect(safeName(notText)).toBe(false);
  });

  it('keeps a file named __proto__ in its state like any other', () => {
    const v = makeVersion('__proto__', '"e1"', '2026-11-28T00:00:00Z', '2026-11-28T00:00:01Z', new Uint8Array([123, 125]));
    const state = JSON.parse(JSON.stringify(stateOf('http://x/', 3, new Map([['__proto__', v]])))) as { files: Record<string, { etag: string }> };
    expect(Object.keys(state.files)).toEqual(['__proto__']);
    expect(Object.getOwnPropertyDescriptor(state.files, '__proto__')?.value).toMatchObject({ etag: '"e1"' });
  });

  it('does not follow a redirect (fetch would send the key on), and says where it pointed', async () => {
    const asked: string[] = [];
    const fake = async (input: string | URL | Request, init?: RequestInit) => {
      asked.push(`${String(input)} ${init?.redirect}`);
      return new Response(null, { status: 302, headers: { location: 'http://elsewhere.test/v1/catalog' } });
    };
    const client = createClient({ url: 'http://oddsfiles.test/', key: 'odf_x', fetch: fake as typeof fetch });
    await expect(
      (async () => {
        for await (const _ of client.changes({ follow: false })) void _;
      })(),
    ).rejects.toThrow(/redirects v1\/catalog to http:\/\/elsewhere\.test/);
    expect(asked).toEqual(['http://oddsfiles.test/v1/catalog manual']);
  });

  it('refuses a patch whose copies would duplicate more than its bound', () => {
    const doc = { a: 'x'.repeat(100) };
    const bomb: PatchOp[] = Array.from({ length: 40 }, (_, i) => ({ op: 'copy', from: '', path: `/x${i}` }));
    expect(() => applyPatch(structuredClone(doc), bomb, 10_000)).toThrow(/copies more than 10000 characters/);
    expect(applyPatch(structuredClone(doc), [{ op: 'copy', from: '/a', path: '/b' }], 10_000)).toEqual({ a: doc.a, b: doc.a });
  });

  it('reads little of an error answer and shows none of its control characters', async () => {
    const endless = new ReadableStream<Uint8Array>({ pull: (c) => c.enqueue(new TextEncoder().encode('x'.repeat(65536))) });
    const shown = await problemDetail(new Response(endless, { status: 503 }));
    expect(shown.length).toBeLessThanOrEqual(301);
    const ansi = JSON.stringify({ detail: '\u001b[2J\u001b]0;title\u0007YOUR KEY EXPIRED\r\n' });
    expect(await problemDetail(new Response(ansi, { status: 400 }))).toBe('[2J ]0;title YOUR KEY EXPIRED');
  });

  it('lists again after a listing cut off mid-body, instead of stopping', async () => {
    let catalogs = 0;
    let streams = 0;
    const fake = async (input: string | URL | Request, init?: RequestInit) => {
      const url = String(input);
      if (url.includes('v1/catalog')) {
        catalogs++;
        if (catalogs === 1) {
          const cut = new ReadableStream<Uint8Array>({
            start: (c) => {
              c.enqueue(new TextEncoder().encode('{"position":1,"fi'));
              c.error(new TypeError('terminated'));
            },
          });
          return new Response(cut, { headers: { 'content-type': 'application/json' } });
        }
        return Response.json({ position: 1, files: [] });
      }
      streams++;
      // A stream that says nothing, and ends when the client closes (as fetch's body would).
      const quiet = new ReadableStream<Uint8Array>({ start: (c) => init?.signal?.addEventListener('abort', () => c.error(new Error('aborted'))) });
      return new Response(quiet, { headers: { 'content-type': 'text/event-stream' } });
    };
    const notices: string[] = [];
    const client = createClient({ url: 'http://oddsfiles.test/', key: 'odf_x', fetch: fake as typeof fetch, onNotice: (n) => notices.push(n.type) });
    const run = (async () => {
      for await (const _ of client.changes()) void _;
    })();
    for (let i = 0; i < 100 && streams === 0; i++) await new Promise((r) => setTimeout(r, 100));
    client.close();
    await run;
    expect({ catalogs, streams, notices }).toEqual({ catalogs: 2, streams: 1, notices: ['reconnect', 'reconnected'] });
  });

  it('stopped by a refused key, leaves no folder it made and keeps one that was there', async () => {
    const root = await mkdtemp(join(tmpdir(), 'oddsfiles-mirror-refused-'));
    try {
      const refused = async () => Response.json({ title: 'Unauthorized', status: 401 }, { status: 401 });
      const sink = () => Object.assign(new PassThrough(), { isTTY: false });
      const io = { stdout: sink(), stderr: sink(), env: {}, cwd: root, fetch: refused as typeof fetch };
      expect(await runMirror({ url: 'http://oddsfiles.test/', key: 'odf_x', dir: 'a/b/c', once: true }, io)).toBe(1);
      expect(await readdir(root)).toEqual([]);
      await mkdir(join(root, 'there'));
      expect(await runMirror({ url: 'http://oddsfiles.test/', key: 'odf_x', dir: 'there/m', once: true }, io)).toBe(1);
      expect(await readdir(root)).toEqual(['there']);
      expect(await readdir(join(root, 'there'))).toEqual([]);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('with --once into a new folder, keeps the position it is current at; a stop ends a write it keeps retrying', async () => {
    const root = await mkdtemp(join(tmpdir(), 'oddsfiles-mirror-once-'));
    try {
      const bytes = new TextEncoder().encode('{"a":1}');
      const etag = `"${createHash('sha256').update(bytes).digest('hex').slice(0, 32)}"`;
      const fake = async (input: string | URL | Request) => {
        const url = String(input);
        if (url.includes('v1/catalog'))
          return Response.json({
            position: 7,
            files: [{ filename: 'a.json', etag, generated_at: '2026-11-28T00:00:00Z', published_at: '2026-11-28T00:00:00Z' }],
          });
        return new Response(bytes, { headers: { 'content-type': 'application/json', etag } });
      };
      const sink = () => Object.assign(new PassThrough(), { isTTY: false });
      const io = { stdout: sink(), stderr: sink(), env: {}, cwd: root, fetch: fake as typeof fetch };
      expect(await runMirror({ url: 'http://oddsfiles.test/', key: 'odf_x', dir: 'm', once: true }, io)).toBe(0);
      const state = JSON.parse(await readFile(join(root, 'm', '.oddsfiles-mirror.json'), 'utf8')) as { position: number; files: Record<string, unknown> };
      expect(state.position).toBe(7);
      expect(Object.keys(state.files)).toEqual(['a.json']);

      // A folder that can never be written (under a file): retried until stopped, then exit 0 at once.
      await writeFile(join(root, 'file'), '');
      const stop = new AbortController();
      const t0 = Date.now();
      const exited = runMirror({ url: 'http://oddsfiles.test/', key: 'odf_x', dir: 'file/m' }, { ...io, signal: stop.signal });
      await new Promise((r) => setTimeout(r, 300));
      stop.abort();
      expect(await exited).toBe(0);
      expect(Date.now() - t0).toBeLessThan(30_000);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('gives up on a stream silent longer than its idle bound', async () => {
    const silent = new ReadableStream<Uint8Array>({ start: () => undefined });
    await expect(
      (async () => {
        for await (const _ of readSse(silent, 50)) void _;
      })(),
    ).rejects.toThrow(/said nothing for 50 ms/);
  });

  it("applies JSON Patches as fast-json-patch does, and canonical JSON is the canonicalize package's", () => {
    // Documents are objects: the server makes patches between two of them.
    const json = fc.dictionary(fc.string({ maxLength: 4 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 6 });
    fc.assert(
      fc.property(json, json, (a, b) => {
        expect(canonical(a)).toBe(canonicalize(a));
        const ops = jsonpatch.compare(a, b) as PatchOp[];
        const mine = applyPatch(JSON.parse(JSON.stringify(a)), ops);
        expect(canonical(mine)).toBe(canonical(JSON.parse(JSON.stringify(b))));
      }),
      { numRuns: 300 },
    );
    const doc = { a: [1, 2, 3], b: { c: 'd' } };
    expect(
      applyPatch(doc, [
        { op: 'move', from: '/b/c', path: '/e' },
        { op: 'copy', from: '/a/0', path: '/a/-' },
        { op: 'test', path: '/e', value: 'd' },
        { op: 'add', path: '/__proto__', value: { polluted: true } },
      ]),
    ).toEqual(JSON.parse('{"a":[1,2,3,1],"b":{},"e":"d","__proto__":{"polluted":true}}'));
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(() => applyPatch({ a: 1 }, [{ op: 'test', path: '/a', value: 2 }])).toThrow(/test failed/);
    expect(() => applyPatch({ a: [] }, [{ op: 'replace', path: '/a/0', value: 2 }])).toThrow(/out of range/);
  });

  it("writes a value back in its file's layout when the file was JSON.stringify's, and says when it cannot", () => {
    const doc = { generated_at: '2026-11-27T12:00:00.000Z', events: [{ odds: [1.5, 2.25] }], e: {} };
    for (const indent of ['', '  ', '    ', '\t'])
      for (const nl of ['', '\n']) {
        const text = JSON.stringify(doc, null, indent) + nl;
        const layout = layoutOf(text);
        expect(layout, JSON.stringify(text)).toBeDefined();
        expect(serialize(doc, layout!)).toBe(text);
      }
    expect(layoutOf('{\r\n  "a": 1\r\n}')).toBeUndefined();
    expect(layoutOf('  {"a":1}')).toBeUndefined();
  });

  it('honours Retry-After (seconds or a date) and backs off with jitter, never below what the server asked', () => {
    expect(retryAfterMs('3')).toBe(3000);
    expect(retryAfterMs(null)).toBeUndefined();
    expect(retryAfterMs(new Date(Date.now() + 10_000).toUTCString())).toBeGreaterThan(8000);
    for (let attempt = 0; attempt < 30; attempt++) {
      const ms = backoffMs(attempt, 5000, 30_000);
      expect(ms).toBeGreaterThanOrEqual(5000);
      expect(ms).toBeLessThanOrEqual(39_000);
    }
    expect(backoffMs(0, undefined, 30_000)).toBeLessThanOrEqual(325);
  });
});
