/**
 * The bare node:http server the reader benches compare with: the reader's own bytes (and, if
 * asked, its response headers) answered from Buffers after a Map lookup of the key, nothing else
 * (no framework, no log, no limits), in a process of its own: the ceiling of a Node server. Used
 * by bench/reader-nginx.ts (a reference in every run) and bench/reader-profile.ts `--bare`
 * (profiled the same way as the reader).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { get, request } from 'node:http';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../../test/helpers/faults.js';
import { onCleanup } from '../common/run.js';

/** Per route (`/v1/files`, `/v1/data/NAME`, `/v1/data/NAME gzip`): the reader's response headers but those Node adds itself. */
export type ReplyHeaders = Record<string, Record<string, string>>;

/** The reader's three answers, saved as `www/files.json`, `www/data/NAME` and `www/data/NAME.gz`. */
export interface Site {
  readonly www: string;
  readonly files: Buffer;
  readonly identity: Buffer;
  readonly gzip: Buffer;
}

/** A GET through node:http: the raw bytes (fetch() would decode a gzip body). */
export function rawGet(url: string, headers: Record<string, string>): Promise<{ status: number; bytes: Buffer; encoding: string | undefined }> {
  return new Promise((resolve, reject) => {
    get(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes: Buffer.concat(chunks), encoding: res.headers['content-encoding'] }));
    }).on('error', reject);
  });
}

/** The headers the reader sends with one answer (as received: lower-case names). */
export function replyHeadersOf(url: string, headers: Record<string, string>): Promise<Record<string, string>> {
  return new Promise((resolve, reject) => {
    request(url, { headers }, (res) => {
      res.resume();
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(res.headers)) {
        if (v === undefined || ['date', 'connection', 'keep-alive', 'transfer-encoding', 'content-length'].includes(k)) continue;
        out[k] = Array.isArray(v) ? v.join(', ') : v;
      }
      res.on('end', () => resolve(out));
    })
      .on('error', reject)
      .end();
  });
}

/** The exact bytes a reader (at `base`) answers for `/v1/files` and `big`, saved under `dir/www` (nginx serves them as static files). */
export async function saveSite(dir: string, base: string, key: string, big: string): Promise<Site> {
  const www = join(dir, 'www');
  await mkdir(join(www, 'data'), { recursive: true });
  const bytesOf = async (path: string, coding: string) => {
    const r = await rawGet(`${base}${path}`, { 'x-api-key': key, 'accept-encoding': coding });
    if (r.status !== 200) throw new Error(`GET ${path}: ${r.status}`);
    if ((r.encoding ?? 'identity') !== coding && path !== '/v1/files') throw new Error(`GET ${path}: answered ${r.encoding ?? 'identity'}, not ${coding}`);
    return r.bytes;
  };
  const site: Site = {
    www,
    files: await bytesOf('/v1/files', 'identity'),
    identity: await bytesOf(`/v1/data/${big}`, 'identity'),
    gzip: await bytesOf(`/v1/data/${big}`, 'gzip'),
  };
  await writeFile(join(www, 'files.json'), site.files);
  await writeFile(join(www, 'data', big), site.identity);
  await writeFile(join(www, 'data', `${big}.gz`), site.gzip);
  return site;
}

/** The reader's response headers for each of the three answers. */
export async function captureReplyHeaders(base: string, key: string, big: string): Promise<ReplyHeaders> {
  return {
    '/v1/files': await replyHeadersOf(`${base}/v1/files`, { 'x-api-key': key }),
    [`/v1/data/${big}`]: await replyHeadersOf(`${base}/v1/data/${big}`, { 'x-api-key': key, 'accept-encoding': 'identity' }),
    [`/v1/data/${big} gzip`]: await replyHeadersOf(`${base}/v1/data/${big}`, { 'x-api-key': key, 'accept-encoding': 'gzip' }),
  };
}

export interface BareNode {
  readonly name: string;
  readonly base: string;
  readonly pid: number;
  stop(): Promise<void>;
}

/**
 * Start the bare server on the files of `saveSite` (`dir/www`). With `replyHeaders`, each answer
 * carries the reader's headers, handed to `writeHead` as one flat list as the reader's hot path
 * does. `nodeArgs` go to its node (e.g. `--perf-basic-prof`).
 */
export async function startBareNode(dir: string, key: string, big: string, replyHeaders?: ReplyHeaders, nodeArgs: readonly string[] = []): Promise<BareNode> {
  const script = join(dir, replyHeaders ? 'bare-node-headers.mjs' : 'bare-node.mjs');
  await writeFile(
    script,
    `import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
const www = ${JSON.stringify(join(dir, 'www'))};
const keys = new Map([[${JSON.stringify(key)}, { id: 'bench' }]]);
const replyHeaders = ${JSON.stringify(replyHeaders ?? {})};
// [name, value, ...]: the form the hot path hands to writeHead.
const flat = Object.fromEntries(Object.entries(replyHeaders).map(([k, h]) => [k, Object.entries(h).flat()]));
const routes = new Map([
  ['/v1/files', { identity: readFileSync(www + '/files.json') }],
  ['/v1/data/${big}', { identity: readFileSync(www + '/data/${big}'), gzip: readFileSync(www + '/data/${big}.gz') }],
]);
const server = createServer((req, res) => {
  if (!keys.has(req.headers['x-api-key'])) return void res.writeHead(401).end();
  const route = routes.get(req.url);
  if (!route) return void res.writeHead(404).end();
  const gz = route.gzip !== undefined && (req.headers['accept-encoding'] ?? '').includes('gzip');
  const body = gz ? route.gzip : route.identity;
  const extra = flat[req.url + (gz ? ' gzip' : '')];
  if (extra) return void res.writeHead(200, [...extra, 'content-length', String(body.length)]).end(body);
  const headers = { 'content-type': 'application/json', 'content-length': body.length };
  if (gz) headers['content-encoding'] = 'gzip';
  res.writeHead(200, headers).end(body);
});
server.keepAliveTimeout = 72_000;
server.listen(Number(process.argv[2]), '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
`,
  );
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, script, String(port)], { stdio: ['ignore', 'ignore', 'inherit'] });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  };
  onCleanup(stop);
  const base = `http://127.0.0.1:${port}`;
  for (
    let i = 0;
    !(await fetch(`${base}/v1/files`, { headers: { 'x-api-key': key } }).then(
      (r) => r.ok,
      () => false,
    ));
    i++
  ) {
    if (i > 100) throw new Error('the bare node:http server did not start');
    await sleep(50);
  }
  const name = replyHeaders
    ? "bare node:http + the reader's response headers (the same 9–11 names and values, the rate-limit fields included; no hashing, no counting)"
    : 'bare node:http (Buffers, key lookup; the ceiling of a Node server)';
  return { name, base, pid: child.pid!, stop };
}
