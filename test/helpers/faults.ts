/**
 * Helpers for the fault-injection tests (test/faults/): a private redis-server that can
 * be paused, stopped and started again; a book of every version dropped; a stream of drops at a
 * steady rate; an HTTP poller that checks every body it is served against the book (torn bodies,
 * regressions of generated_at, 404s after a name was served); the memory of a process.
 *
 * Nothing here touches the shared Redis on 6379 beyond the prefixes the tests pass in.
 */
import type { ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { Agent, request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { CatalogEntry } from '../../src/catalog/types.js';
import { spawnTracked } from './processes.js';
import { runCli, waitFor } from './service.js';

/** Long fault scenarios run under `npm run test:faults` (the faults project of vitest.config.ts sets this). */
export const SLOW_FAULTS = process.env.ODDSFILES_FAULTS === '1';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

// ---------------------------------------------------------------------------------------------
// A private redis-server

export interface PrivateRedis {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  pid(): number | undefined;
  /** SIGSTOP: connections stay open, nothing answers. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  /** SIGTERM (append-only file flushed), wait for the exit. */
  stop(): Promise<void>;
  /** Start again on the same port over the same data. */
  start(): Promise<void>;
}

/** A redis-server on a free port, append-only like production, data under `dir`. */
export async function startPrivateRedis(dir: string): Promise<PrivateRedis> {
  await mkdir(dir, { recursive: true });
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const launch = async () => {
    const c = spawnTracked(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--appendonly',
        'yes',
        '--appendfsync',
        'always',
        '--save',
        '',
        '--maxmemory-policy',
        'noeviction',
      ],
      {
        stdio: 'ignore',
      },
    );
    child = c;
    await waitFor(
      async () => {
        if (c.exitCode !== null) throw new Error(`redis-server exited with ${c.exitCode}`);
        return pingOnce(url);
      },
      10_000,
      'the private redis-server',
    );
  };
  await launch();
  return {
    url,
    port,
    dir,
    pid: () => child?.pid,
    pause: () => void child?.kill('SIGSTOP'),
    resume: () => void child?.kill('SIGCONT'),
    async stop() {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      c.kill('SIGCONT');
      const exited = new Promise<void>((r) => c.once('exit', () => r()));
      c.kill('SIGTERM');
      await exited;
    },
    start: launch,
  };
}

async function pingOnce(url: string): Promise<boolean> {
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null, connectTimeout: 500 });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

export async function readCatalogAt(url: string, prefix: string): Promise<Map<string, CatalogEntry>> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    const all = await redis.hgetall(`${prefix}:catalog`);
    return new Map(Object.entries(all).map(([k, v]) => [k, JSON.parse(v) as CatalogEntry]));
  } finally {
    redis.disconnect();
  }
}

export async function catalogSeqAt(url: string, prefix: string): Promise<number> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    return Number((await redis.get(`${prefix}:catalog:seq`)) ?? 0);
  } finally {
    redis.disconnect();
  }
}

// ---------------------------------------------------------------------------------------------
// Configuration and keys

/**
 * The YAML config of a fault test. The `pro` plan has no rate, so a poller is never throttled
 * (rate limits are not what these tests are about).
 */
export async function writeFaultConfig(dataDir: string, extra = ''): Promise<string> {
  const file = join(dataDir, 'oddsfiles.yaml');
  await writeFile(file, `plans:\n  pro: { allow: ["*"] }\n${extra}`);
  return file;
}

export async function createApiKey(env: Record<string, string>, name = `poller-${randomBytes(3).toString('hex')}`): Promise<string> {
  const res = await runCli(env, ['keys', 'create', '--name', name, '--plan', 'pro']);
  if (res.code !== 0) throw new Error(`keys create failed (${res.code}): ${res.stderr}`);
  return res.stdout.trim();
}

// ---------------------------------------------------------------------------------------------
// Versions dropped

export interface DroppedVersion {
  readonly filename: string;
  readonly sha256: string;
  readonly generatedAtMs: number;
}

export function sha256(bytes: Buffer | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Every version dropped, by hash, and the newest per filename. */
export class VersionBook {
  readonly bySha = new Map<string, DroppedVersion>();
  readonly newest = new Map<string, DroppedVersion>();
  add(filename: string, bytes: Buffer, generatedAtMs: number): DroppedVersion {
    const v = { filename, sha256: sha256(bytes), generatedAtMs };
    this.bySha.set(v.sha256, v);
    const cur = this.newest.get(filename);
    if (!cur || cur.generatedAtMs <= generatedAtMs) this.newest.set(filename, v);
    return v;
  }
}

export interface FeedLike {
  readonly filename: string;
  readonly bookmaker: string;
  readonly sport: string | null;
}

/** A valid document of about `size` bytes (the padding is an extra property), unique per filename. */
export function docFor(feed: FeedLike, generatedAtMs: number, size = 0, extra: Record<string, unknown> = {}): Buffer {
  const body = {
    bookmaker: feed.bookmaker,
    generated_at: new Date(generatedAtMs).toISOString(),
    ...(feed.sport ? { sport: feed.sport } : {}),
    events: [],
    feed: feed.filename,
    ...extra,
  };
  const base = JSON.stringify(body);
  if (size <= base.length + 12) return Buffer.from(base);
  return Buffer.from(JSON.stringify({ ...body, pad: 'x'.repeat(size - base.length - 10) }));
}

/** Drop the way publishers are told to: a dotfile, then a rename. */
export async function dropFile(inbox: string, name: string, bytes: Buffer): Promise<void> {
  const tmp = join(inbox, `.${randomBytes(6).toString('hex')}.tmp`);
  await writeFile(tmp, bytes);
  await rename(tmp, join(inbox, name));
}

export interface DropStream {
  readonly count: () => number;
  /** Stop after the drop under way; resolves with how many were dropped. */
  stop(): Promise<number>;
}

/**
 * Drops at about `perSecond`, round-robin over `feeds`, each newer than every drop before it
 * (generated_at = startMs + n seconds), one at a time so that renames land in order: the last
 * drop of each filename is its newest.
 */
export function startDropStream(opts: {
  inbox: string;
  feeds: readonly FeedLike[];
  perSecond: number;
  book: VersionBook;
  startMs: number;
  sizes?: readonly [number, number];
  seq?: { n: number };
}): DropStream {
  const seq = opts.seq ?? { n: 0 };
  let dropped = 0;
  let stopped = false;
  const t0 = Date.now();
  const [lo, hi] = opts.sizes ?? [200, 20_000];
  const loop = (async () => {
    while (!stopped) {
      const owed = Math.floor(((Date.now() - t0) / 1000) * opts.perSecond) - dropped;
      if (owed <= 0) {
        await sleep(3);
        continue;
      }
      const n = seq.n++;
      const feed = opts.feeds[n % opts.feeds.length]!;
      const at = opts.startMs + n * 1000;
      const bytes = docFor(feed, at, lo + ((n * 7919) % Math.max(1, hi - lo)), { n });
      opts.book.add(feed.filename, bytes, at);
      await dropFile(opts.inbox, feed.filename, bytes);
      dropped++;
    }
  })();
  return {
    count: () => dropped,
    async stop() {
      stopped = true;
      await loop;
      return dropped;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// HTTP

const agent = new Agent({ keepAlive: true, maxSockets: 16 });

export interface HttpResult {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
}

export function httpGet(url: string, headers: Record<string, string> = {}, timeoutMs = 5000): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent, headers, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

export interface PollerReport {
  requests: number;
  ok: number;
  /** Responses by status. */
  statuses: Record<number, number>;
  /** Connections refused or reset (the service was down). */
  connectionErrors: number;
  /** What broke a promise: torn or unknown body, generated_at going back, 404 after a 200. */
  violations: string[];
  /** Newest generated_at served per filename. */
  served: Map<string, number>;
}

export interface Poller {
  readonly report: PollerReport;
  stop(): Promise<PollerReport>;
}

/**
 * Downloads `names` continuously from the reader at `url()` (a function: the URL may change) with
 * `key`, and checks each response against `book`. Several loops at once, each pausing `pauseMs`.
 */
export function startPoller(opts: {
  url: () => string;
  key: string;
  names: readonly string[];
  book: VersionBook;
  loops?: number;
  pauseMs?: number;
  label?: string;
}): Poller {
  const report: PollerReport = { requests: 0, ok: 0, statuses: {}, connectionErrors: 0, violations: [], served: new Map() };
  const label = opts.label ?? 'poller';
  /**
   * Per filename, the answers received so far in the order received: when, and the newest
   * generated_at seen up to then. Loops run side by side, so an answer to a request sent before a
   * newer answer arrived may legitimately be older; a regression is an answer older than one that
   * had already been received when its request was sent.
   */
  const history = new Map<string, { at: number[]; newest: number[] }>();
  const newestBefore = (name: string, sentAt: number): number | undefined => {
    const h = history.get(name);
    if (!h) return undefined;
    let lo = 0;
    let hi = h.at.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (h.at[mid]! < sentAt) lo = mid + 1;
      else hi = mid;
    }
    return lo === 0 ? undefined : h.newest[lo - 1];
  };
  const record = (name: string, generatedAtMs: number) => {
    let h = history.get(name);
    if (!h) history.set(name, (h = { at: [], newest: [] }));
    h.at.push(performance.now());
    h.newest.push(Math.max(h.newest.at(-1) ?? -Infinity, generatedAtMs));
  };
  let stopped = false;
  const violation = (text: string) => {
    if (report.violations.length < 200) report.violations.push(`${label}: ${text}`);
  };
  const loop = async (offset: number) => {
    let i = offset;
    while (!stopped) {
      const name = opts.names[i++ % opts.names.length]!;
      const sentAt = performance.now();
      let res: HttpResult;
      try {
        res = await httpGet(`${opts.url()}/v1/data/${name}`, { 'x-api-key': opts.key });
      } catch {
        report.connectionErrors++;
        await sleep(20);
        continue;
      }
      report.requests++;
      report.statuses[res.status] = (report.statuses[res.status] ?? 0) + 1;
      if (res.status === 200) {
        report.ok++;
        let doc: { generated_at?: string };
        try {
          doc = JSON.parse(res.body.toString('utf8')) as { generated_at?: string };
        } catch {
          violation(`${name}: a 200 body that is not JSON (${res.body.length} bytes): torn`);
          continue;
        }
        const v = opts.book.bySha.get(sha256(res.body));
        if (!v) violation(`${name}: a 200 body that matches no dropped version (${res.body.length} bytes)`);
        else if (v.filename !== name) violation(`${name}: served the bytes of ${v.filename}`);
        const at = Date.parse(doc.generated_at ?? '');
        const before = newestBefore(name, sentAt);
        if (before !== undefined && at < before) {
          violation(`${name}: generated_at went back from ${new Date(before).toISOString()} to ${doc.generated_at}`);
        }
        record(name, at);
        const served = report.served.get(name);
        if (served === undefined || at > served) report.served.set(name, at);
      } else if (res.status === 404) {
        if (newestBefore(name, sentAt) !== undefined) violation(`${name}: 404 after it was served`);
      } else if (res.status >= 500 && res.status !== 503) {
        violation(`${name}: ${res.status} ${res.body.toString('utf8').slice(0, 200)}`);
      }
      if (opts.pauseMs) await sleep(opts.pauseMs);
    }
  };
  const loops = Array.from({ length: opts.loops ?? 3 }, (_, k) => loop(k * 7));
  return {
    report,
    async stop() {
      stopped = true;
      await Promise.all(loops);
      return report;
    },
  };
}

/** Wait until the reader serves the newest dropped version of every filename in `book`. */
export async function waitServesNewest(url: string, key: string, book: VersionBook, timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  const pending = new Set(book.newest.keys());
  await waitFor(
    async () => {
      for (const name of [...pending]) {
        const res = await httpGet(`${url}/v1/data/${name}`, { 'x-api-key': key }).catch(() => undefined);
        if (res?.status === 200 && sha256(res.body) === book.newest.get(name)!.sha256) pending.delete(name);
      }
      return pending.size === 0;
    },
    timeoutMs,
    `the newest version of every filename served (still missing: ${[...pending].slice(0, 5).join(', ')})`,
    100,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; missing ${pending.size}: ${[...pending].slice(0, 5).join(', ')}`);
  });
  return Date.now() - t0;
}

// ---------------------------------------------------------------------------------------------
// Processes, folders

/** Resident memory of a process in MiB: now (VmRSS) and its peak (VmHWM). */
export function memoryOf(pid: number): { rssMb: number; peakMb: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
  return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
}

export interface RejectionOnDisk {
  readonly id: string;
  readonly filename: string;
  readonly reason: string;
  readonly detail: string;
}

export async function rejectionsIn(rejectedDir: string): Promise<RejectionOnDisk[]> {
  const ids = (await readdir(rejectedDir).catch(() => [] as string[])).filter((i) => !i.startsWith('.'));
  const out: RejectionOnDisk[] = [];
  for (const id of ids) {
    const text = await readFile(join(rejectedDir, id, 'reason.json'), 'utf8').catch(() => undefined);
    if (text) out.push(JSON.parse(text) as RejectionOnDisk);
  }
  return out;
}

/** Deterministic shuffle (LCG), so a failing order can be replayed. */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = [...items];
  let s = seed >>> 0;
  for (let i = out.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** A small deterministic PRNG in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
