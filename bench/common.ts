/**
 * Shared parts of the benchmarks (bench/*.ts): the machine and versions, statistics, the built
 * `oddsfiles` command as child processes (logs to a file, read back when needed), a bare
 * reference pipeline, drops made from test/fixtures/corpus.ts, process CPU and memory from /proc,
 * Redis prefix clean-up, and the generated parts of docs/BENCHMARKS.md.
 *
 * Everything runs on 127.0.0.1, against the Redis of the tests (TEST_REDIS_URL, default
 * redis://127.0.0.1:6379) under a unique REDIS_PREFIX per system, in temp dirs under
 * os.tmpdir(); all of it is removed at the end (also on SIGINT/SIGTERM).
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, open, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { createServer } from 'node:net';
import { availableParallelism, cpus, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { baseEnv, BIN, ROOT, runCli } from '../test/helpers/service.js';
import { dropPrefix } from '../test/helpers/redis.js';
import { EXAMPLE_FEEDS, generateDocument, type FixtureFeed } from '../test/fixtures/corpus.js';

export { EXAMPLE_FEEDS, ROOT, type FixtureFeed };

export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const DOC_PATH = join(ROOT, 'docs/BENCHMARKS.md');
export const BENCH_DIR = dirname(fileURLToPath(import.meta.url));

// ------------------------------------------------------------------------------------ clean-up

const cleanups: (() => Promise<unknown>)[] = [];

/** Run at exit, last registered first (children are stopped before their Redis keys go). */
export function onCleanup(fn: () => Promise<unknown>): void {
  cleanups.push(fn);
}

async function runCleanups(): Promise<void> {
  while (cleanups.length > 0) {
    const fn = cleanups.pop()!;
    await fn().catch((err: unknown) => process.stderr.write(`cleanup: ${(err as Error).message}\n`));
  }
}

/** Run a benchmark's main with clean-up on success, failure and SIGINT/SIGTERM. */
export function runMain(main: () => Promise<void>): void {
  // `--help`: the usage lines of the bench's own header comment, and nothing is run (a bench
  // started by mistake would rewrite its block of docs/BENCHMARKS.md).
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    const lines = readFileSync(process.argv[1]!, 'utf8').split('\n');
    const usage = lines.filter((l) => /^ \*\s+npx tsx bench\//.test(l)).map((l) => l.replace(/^ \*\s+/, '  '));
    process.stdout.write(`${usage.join('\n') || '  (no usage lines: see the comment at the top of the file)'}\n`);
    return;
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) process.exit(130);
    stopping = true;
    process.stderr.write(`\n${signal}: cleaning up…\n`);
    void runCleanups().finally(() => process.exit(130));
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
  main()
    .catch((err: unknown) => {
      process.stderr.write(`bench: ${(err as Error).stack ?? String(err)}\n`);
      process.exitCode = 1;
    })
    .finally(() => void runCleanups().finally(() => setTimeout(() => process.exit(), 100).unref()));
}

export function uniquePrefix(label: string): string {
  return `bench-${label}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

export { dropPrefix };

/** A numeric command-line option: `--name 12`. */
/** `--FLAG NAME=VALUE` (repeatable) as an environment, e.g. `--env UV_THREADPOOL_SIZE=8`. */
export function envArgs(flag: string, args: readonly string[] = process.argv.slice(2)): Record<string, string> {
  return Object.fromEntries(args.flatMap((a, i) => (a === flag && args[i + 1]?.includes('=') ? [args[i + 1]!.split(/=(.*)/s).slice(0, 2) as [string, string]] : [])));
}

export function numberArg(name: string, fallback: number, args: readonly string[] = process.argv.slice(2)): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

/** The value after `--name`, or `fallback`. */
export function stringArg(name: string, fallback: string | undefined, args: readonly string[] = process.argv.slice(2)): string | undefined {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
}

export async function tempDir(label: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `oddsfiles-bench-${label}-`));
  // BENCH_KEEP=1 keeps the folders (logs, stores) for a look after the run.
  if (process.env.BENCH_KEEP === '1') log(`keeping ${dir} (BENCH_KEEP=1)`);
  else onCleanup(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

// ------------------------------------------------------------------------- machine, versions

export interface MachineInfo {
  readonly nproc: number;
  readonly cpu: string;
  readonly ramGiB: number;
  readonly node: string;
  readonly redis: string;
  readonly nginx: string;
  readonly wrk: string;
  readonly load: string;
  /** The commit measured, and whether src/ or workers/ differ from it. */
  readonly code: string;
}

function tryRun(cmd: string, args: string[]): string | undefined {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch (err) {
    // nginx -v prints to stderr.
    const e = err as { stderr?: string; code?: string };
    if (e.code === 'ENOENT') return undefined;
    return e.stderr?.trim() || undefined;
  }
}

export function which(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/sbin'])) {
    const p = join(dir, cmd);
    if (dir && existsSync(p)) return p;
  }
  return undefined;
}

export function machineInfo(): MachineInfo {
  const model = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? cpus()[0]?.model ?? 'unknown';
  return {
    nproc: availableParallelism(),
    cpu: model,
    ramGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    redis: (versionOf('redis-server', ['--version']) ?? 'redis-server not on PATH').replace(/ sha=.*$/, ''),
    nginx: versionOf('nginx', ['-v']) ?? 'nginx not installed',
    wrk: versionOf('wrk', ['-v'])?.replace(/ \[.*$/, '') ?? 'wrk not installed',
    load: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
    code: codeVersion(),
  };
}

/** `abc1234`, plus a note when src/ or workers/ have uncommitted changes (the bench runs dist/). */
function codeVersion(): string {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout?.trim() || 'unknown';
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'src', 'workers'], { cwd: ROOT, encoding: 'utf8' }).stdout?.trim();
  return dirty ? `${head} + uncommitted changes in src/` : head;
}

/** First line a command prints about its version (stdout or stderr: nginx -v uses stderr, wrk -v exits 1). */
function versionOf(cmd: string, args: string[]): string | undefined {
  const bin = which(cmd);
  if (!bin) return undefined;
  const r = spawnSync(bin, args, { encoding: 'utf8' });
  return `${r.stdout ?? ''}\n${r.stderr ?? ''}`.split('\n').map((l) => l.trim()).find((l) => l.length > 0);
}

export function machineLine(m: MachineInfo): string {
  return `Code: ${m.code} (dist/ built from it). Machine: \`nproc\` = ${m.nproc}, ${m.cpu}, ${m.ramGiB} GiB RAM; Node ${m.node}, ${m.redis}, ${m.nginx}, ${m.wrk}; load average at start ${m.load}.`;
}

// ------------------------------------------------------------------------------- statistics

export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  // Nearest rank: p99 of 60 samples is the 60th (the maximum); said so in the docs.
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1));
  return s[i]!;
}

export const median = (values: readonly number[]): number => quantile(values, 0.5);

export function fmtMs(v: number): string {
  if (!Number.isFinite(v)) return '—';
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

export function fmtInt(v: number): string {
  return Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : '—';
}

export function fmtX(v: number): string {
  return Number.isFinite(v) ? `${v.toFixed(2)}×` : '—';
}

export function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Wall-clock milliseconds with sub-millisecond resolution (comparable with Date.now()). */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

export function log(msg: string): void {
  process.stderr.write(`${new Date().toISOString().slice(11, 23)} ${msg}\n`);
}

// ------------------------------------------------------------------------------ /proc figures

const CLK_TCK = Number(tryRun('getconf', ['CLK_TCK']) ?? 100) || 100;

/** User + system CPU time of a process (all its threads), ms; NaN once it is gone. */
export function cpuMs(pid: number): number {
  const { user, system } = cpuSplitMs(pid);
  return user + system;
}

/**
 * CPU time of a process so far, ms, split into user space (JavaScript, V8, Node's C++, libuv)
 * and the kernel (system calls: the socket writes, and on loopback the receiving side's TCP work
 * and the wake-up of the client, done in the sender's call). NaN when the process is gone.
 */
export function cpuSplitMs(pid: number): { user: number; system: number } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After the command: state is field 3, utime 14, stime 15 (1-based over the whole line).
    return { user: (Number(fields[11]) * 1000) / CLK_TCK, system: (Number(fields[12]) * 1000) / CLK_TCK };
  } catch {
    return { user: Number.NaN, system: Number.NaN };
  }
}

/** VmRSS and VmHWM (peak RSS) in bytes. */
export function memOf(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/**
 * Wait until the processes stop using CPU (compression, manifest writes, GC after a round), so the
 * next measured round does not pay for the previous one: at most `maxMs`.
 */
export async function quiesce(pids: readonly number[], opts: { windowMs?: number; maxCpuMs?: number; maxMs?: number } = {}): Promise<number> {
  const windowMs = opts.windowMs ?? 200;
  const maxCpu = opts.maxCpuMs ?? 20;
  const deadline = Date.now() + (opts.maxMs ?? 5000);
  const started = Date.now();
  const total = () => pids.reduce((s, p) => s + (Number.isFinite(cpuMs(p)) ? cpuMs(p) : 0), 0);
  let before = total();
  for (;;) {
    await sleep(windowMs);
    const after = total();
    if (after - before <= maxCpu || Date.now() > deadline) return Date.now() - started;
    before = after;
  }
}

// ------------------------------------------------------------------------------------ drops

/** The generated_at written by the generator; replaced in place (same length) for each drop. */
export const TEMPLATE_GENERATED_AT = '2000-01-01T00:00:00.000Z';

export interface DocTemplate {
  readonly feed: FixtureFeed;
  readonly bytes: Buffer;
  /** Offset of the template generated_at in bytes. */
  readonly at: number;
}

export function docTemplate(feed: FixtureFeed, targetBytes: number): DocTemplate {
  const bytes = generateDocument(feed, { targetBytes, generatedAt: TEMPLATE_GENERATED_AT });
  const at = bytes.indexOf(`"${TEMPLATE_GENERATED_AT}"`);
  if (at < 0) throw new Error(`no generated_at in the document for ${feed.filename}`);
  return { feed, bytes, at: at + 1 };
}

let clock = Date.now() - 3_600_000;

/** A new version of the template: a later generated_at than any before (1 ms apart). */
export function version(t: DocTemplate): { bytes: Buffer; generatedAt: string; etag: string; sha256: string } {
  clock = Math.max(clock + 1, Date.now() - 3_600_000);
  const generatedAt = new Date(clock).toISOString();
  const bytes = Buffer.from(t.bytes);
  bytes.write(generatedAt, t.at, 'latin1');
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  return { bytes, generatedAt, sha256, etag: `"${sha256.slice(0, 32)}"` };
}

/** Feeds of a generated registry: `bookmakers` split bookmakers bk0001… × the given sports. */
export const MANY_SPORTS = ['soccer', 'basketball', 'tennis', 'hockey', 'baseball', 'rugby', 'cricket', 'handball', 'volleyball', 'darts'];

export function generatedRegistry(bookmakers: number, sports: readonly string[]): { config: Record<string, unknown>; feeds: FixtureFeed[] } {
  const bks = Array.from({ length: bookmakers }, (_, i) => {
    const key = `bk${String(i + 1).padStart(4, '0')}`;
    return { key, name: `Bk${String(i + 1).padStart(4, '0')}`, feeds: 'split' };
  });
  const feeds: FixtureFeed[] = [];
  for (const b of bks) {
    for (const sport of sports) {
      feeds.push({ filename: `site_live_${b.key}_${sport}.json`, bookmaker: b.key, kind: 'live', sport });
      feeds.push({ filename: `site_pregame_${b.key}_${sport}.json`, bookmaker: b.key, kind: 'pregame', sport });
    }
  }
  return { config: { bookmakers: bks, sports: [...sports] }, feeds };
}

/**
 * The benchmark's config file: the `pro` plan without a practical rate limit (a tight poll loop or
 * wrk would get 429 after 600 requests), plus whatever the benchmark sets. JSON is YAML.
 */
export async function writeConfig(dir: string, extra: Record<string, unknown> = {}): Promise<string> {
  const path = join(dir, `oddsfiles-${randomBytes(3).toString('hex')}.yaml`);
  const config = { plans: { pro: { allow: ['*'], rate: { max: 1_000_000_000, per: '1m' } } }, ...extra };
  await writeFile(path, JSON.stringify(config, null, 1));
  return path;
}

// ------------------------------------------------------------------- the oddsfiles processes

export type LogLine = Record<string, unknown> & { msg?: string; time?: string };

/** One `oddsfiles` child process; stdout (JSON lines) goes to a file, read back on demand. */
export class OddsfilesProcess {
  readonly proc: ChildProcess;
  readonly logFile: string;
  private offset = 0;
  private partial = '';
  private stderr = '';
  private exitCode: number | null | undefined;
  readonly exited: Promise<void>;

  constructor(
    env: Record<string, string>,
    args: string[],
    logFile: string,
    /** Its roles, e.g. ['watcher', 'worker']. */
    readonly roles: readonly string[] = [],
    nodeArgs: readonly string[] = [],
    bin: string = BIN,
  ) {
    this.logFile = logFile;
    const fd = openSync(logFile, 'a');
    this.proc = spawn(process.execPath, [...nodeArgs, bin, ...args], { env, cwd: env.DATA_DIR, stdio: ['ignore', fd, 'pipe'] });
    closeSync(fd);
    this.proc.stderr!.setEncoding('utf8').on('data', (c: string) => (this.stderr = (this.stderr + c).slice(-4000)));
    this.exited = new Promise((r) =>
      this.proc.once('exit', (code) => {
        this.exitCode = code;
        r();
      }),
    );
  }

  get pid(): number {
    return this.proc.pid!;
  }

  /** New log lines since the last call whose raw text contains `needle` (cheap pre-filter). */
  readLines(needle?: string): LogLine[] {
    const size = statSync(this.logFile).size;
    if (size <= this.offset) return [];
    const fd = openSync(this.logFile, 'r');
    const buf = Buffer.allocUnsafe(size - this.offset);
    try {
      readSync(fd, buf, 0, buf.length, this.offset);
    } finally {
      closeSync(fd);
    }
    this.offset = size;
    const text = this.partial + buf.toString('utf8');
    const lines = text.split('\n');
    this.partial = lines.pop() ?? '';
    const out: LogLine[] = [];
    for (const l of lines) {
      if (needle !== undefined && !l.includes(needle)) continue;
      try {
        out.push(JSON.parse(l) as LogLine);
      } catch {
        /* not JSON */
      }
    }
    return out;
  }

  async waitForLine(pred: (l: LogLine) => boolean, needle: string, timeoutMs = 30_000): Promise<LogLine> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.readLines(needle).find(pred);
      if (hit) return hit;
      if (this.exitCode !== undefined) throw new Error(`oddsfiles exited (${this.exitCode}); stderr: ${this.stderr}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for "${needle}" in ${this.logFile}; stderr: ${this.stderr}`);
      await sleep(25);
    }
  }

  async stop(timeoutMs = 15_000): Promise<void> {
    if (this.exitCode !== undefined) return;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), timeoutMs);
    await this.exited;
    clearTimeout(t);
  }
}

export interface OddsfilesOptions {
  readonly label: string;
  /**
   * Process layout: every role in one process (`npm start`); one process per role (compose); no
   * reader; watcher+worker and a reader; watcher and worker in two processes, no reader.
   */
  readonly shape: 'single' | 'split' | 'ingest' | 'pair' | 'worker-only';
  /** Extra `--roles worker` processes. */
  readonly extraWorkers?: number;
  /** Merged into the config file (e.g. { ingest: { concurrency: 8 } }, a registry). */
  readonly config?: Record<string, unknown>;
  readonly logLevel?: string;
  readonly env?: Record<string, string>;
  /** Node options before the script (e.g. --cpu-prof; NODE_OPTIONS refuses it). */
  readonly nodeArgs?: readonly string[];
  /** The entry point to run (default: this checkout's dist/workers/oddsfiles.js), e.g. an older build's for an A/B. */
  readonly bin?: string;
}

/** A running oddsfiles deployment on a fresh data dir and Redis prefix. */
export class OddsfilesSystem {
  readonly kind = 'oddsfiles';
  readonly procs: OddsfilesProcess[] = [];
  readerUrl: string | undefined;
  key = '';
  private queue: Queue | undefined;
  private queueRedis: Redis | undefined;

  private constructor(
    readonly label: string,
    readonly dataDir: string,
    readonly prefix: string,
    readonly env: Record<string, string>,
  ) {}

  get inbox(): string {
    return join(this.dataDir, 'inbox');
  }

  get channel(): string {
    return `${this.prefix}:catalog:changes`;
  }

  get catalogKey(): string {
    return `${this.prefix}:catalog`;
  }

  pids(): number[] {
    return this.procs.map((p) => p.pid);
  }

  /** The (first) process running the worker role. */
  get worker(): OddsfilesProcess {
    return this.procs.find((p) => p.roles.includes('worker'))!;
  }

  get reader(): OddsfilesProcess | undefined {
    return this.procs.find((p) => p.roles.includes('reader'));
  }

  static async start(opts: OddsfilesOptions): Promise<OddsfilesSystem> {
    const dataDir = await tempDir(opts.label);
    const prefix = uniquePrefix(opts.label);
    onCleanup(() => dropPrefix(prefix));
    const configPath = await writeConfig(dataDir, opts.config);
    const env = baseEnv(dataDir, prefix, { ODDSFILES_CONFIG: configPath, LOG_LEVEL: opts.logLevel ?? 'info', ...opts.env });
    const sys = new OddsfilesSystem(opts.label, dataDir, prefix, env);
    onCleanup(() => sys.stop());
    const layouts: Record<OddsfilesOptions['shape'], [string, string][]> = {
      single: [['watcher,worker,reader', 'all-worker-reader']],
      split: [
        ['watcher', 'watcher'],
        ['worker', 'worker'],
        ['reader', 'reader'],
      ],
      ingest: [['watcher,worker', 'watcher-worker']],
      pair: [
        ['watcher,worker', 'watcher-worker'],
        ['reader', 'reader'],
      ],
      'worker-only': [
        ['watcher', 'watcher'],
        ['worker', 'worker'],
      ],
    };
    const layout = [...layouts[opts.shape]];
    for (let i = 0; i < (opts.extraWorkers ?? 0); i++) layout.push(['worker', `extra${i}-worker`]);
    // Start the processes one after another: they all create the inbox, the queue, ...
    for (const [roles, name] of layout) {
      const p = new OddsfilesProcess(env, ['start', '--roles', roles], join(dataDir, `${name}.log`), roles.split(','), opts.nodeArgs, opts.bin);
      sys.procs.push(p);
      const started = await p.waitForLine((l) => l.msg === 'oddsfiles started', 'oddsfiles started');
      if (typeof started.reader === 'string') sys.readerUrl = started.reader;
    }
    if (sys.readerUrl) {
      const created = await runCli(env, ['keys', 'create', '--name', 'bench', '--plan', 'pro']);
      if (created.code !== 0) throw new Error(`keys create failed: ${created.stderr}`);
      sys.key = created.stdout.trim();
    }
    return sys;
  }

  /** The BullMQ queue (to read the jobs' own timestamps). */
  ingestQueue(): Queue {
    if (!this.queue) {
      this.queueRedis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
      this.queue = new Queue('ingest', { connection: this.queueRedis, prefix: this.prefix });
    }
    return this.queue;
  }

  /** Inbox and .processing hold no drop. */
  async drained(): Promise<boolean> {
    const inbox = (await readdir(this.inbox)).filter((n) => !n.startsWith('.') && !n.endsWith('.tmp'));
    if (inbox.length > 0) return false;
    return (await readdir(join(this.inbox, '.processing'))).filter((n) => !n.endsWith('.tmp')).length === 0;
  }

  async stop(): Promise<void> {
    await this.queue?.close().catch(() => undefined);
    this.queueRedis?.disconnect();
    this.queue = undefined;
    await Promise.all(this.procs.map((p) => p.stop()));
  }
}

// ------------------------------------------------------------ the bare reference pipeline

/**
 * bench/bare-pipeline.ts in a child process: the same architecture reduced to its unavoidable
 * work (fs.watch → claim by rename → read → JSON.parse → sha256 → temp+fsync+rename+fsync dir →
 * Redis HSET+PUBLISH → subscriber re-reads the object → node:http serves it from memory).
 */
export class BareSystem {
  readonly kind = 'bare';
  readonly key = 'bare-key';
  readerUrl = '';
  private proc: ChildProcess | undefined;

  private constructor(
    readonly label: string,
    readonly dataDir: string,
    readonly prefix: string,
  ) {}

  get inbox(): string {
    return join(this.dataDir, 'inbox');
  }

  get channel(): string {
    return `${this.prefix}:bare:changes`;
  }

  pids(): number[] {
    return this.proc?.pid ? [this.proc.pid] : [];
  }

  static async start(label: string): Promise<BareSystem> {
    const dataDir = await tempDir(label);
    const prefix = uniquePrefix(label);
    onCleanup(() => dropPrefix(prefix));
    const sys = new BareSystem(label, dataDir, prefix);
    onCleanup(() => sys.stop());
    await mkdir(join(dataDir, 'inbox', '.processing'), { recursive: true });
    const child = spawn(process.execPath, ['--import', 'tsx', join(BENCH_DIR, 'bare-pipeline.ts')], {
      cwd: ROOT,
      env: { ...process.env, BARE: JSON.stringify({ dataDir, prefix, redisUrl: REDIS_URL, key: sys.key }) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    sys.proc = child;
    sys.readerUrl = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout!.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        const line = out.split('\n').find((l) => l.startsWith('{'));
        if (line) resolve((JSON.parse(line) as { url: string }).url);
      });
      child.once('exit', (code) => reject(new Error(`bare pipeline exited (${code})`)));
    });
    return sys;
  }

  async drained(): Promise<boolean> {
    const inbox = (await readdir(this.inbox)).filter((n) => !n.startsWith('.') && !n.endsWith('.tmp'));
    if (inbox.length > 0) return false;
    return (await readdir(join(this.inbox, '.processing'))).length === 0;
  }

  async stop(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    p.kill('SIGTERM');
    await new Promise((r) => p.once('exit', r));
  }
}

export type System = OddsfilesSystem | BareSystem;

// ------------------------------------------------------------------------------ HTTP polling

export interface HttpResult {
  readonly status: number;
  readonly etag: string | undefined;
  readonly bytes: number;
}

/** A keep-alive client on one socket: what a tight poller does. */
export class Poller {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 1 });
  private readonly url: URL;

  constructor(
    base: string,
    private readonly key: string,
  ) {
    this.url = new URL(base);
  }

  get(path: string, headers: Record<string, string> = {}): Promise<HttpResult> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: this.url.hostname, port: this.url.port, path, agent: this.agent, headers: { 'x-api-key': this.key, ...headers } },
        (res) => {
          let bytes = 0;
          res.on('data', (c: Buffer) => (bytes += c.length));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, etag: res.headers.etag, bytes }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end();
    });
  }

  /**
   * Poll `path` back to back (or `gapMs` apart) until it answers 200 with `etag`; the time of that answer (ms, wall
   * clock), or undefined after `timeoutMs`.
   */
  async until(path: string, etag: string, previous: string | undefined, timeoutMs: number, gapMs = 0): Promise<{ at: number; polls: number } | undefined> {
    const deadline = nowMs() + timeoutMs;
    let polls = 0;
    const headers: Record<string, string> = previous ? { 'if-none-match': previous } : {};
    while (nowMs() < deadline) {
      const r = await this.get(path, headers);
      polls++;
      if (r.status === 200 && r.etag === etag) return { at: nowMs(), polls };
      if (r.status >= 400 && r.status !== 404 && r.status !== 503) throw new Error(`GET ${path}: ${r.status}`);
      if (gapMs > 0) await sleep(gapMs);
    }
    return undefined;
  }

  close(): void {
    this.agent.destroy();
  }
}

// ---------------------------------------------------------------------------- catalog checks

/** filename → sha256 of what the catalog holds (oddsfiles' catalog hash). */
export async function catalogShas(redis: Redis, key: string): Promise<Map<string, string>> {
  const flat = await redis.hgetall(key);
  const out = new Map<string, string>();
  for (const [name, json] of Object.entries(flat)) out.set(name, (JSON.parse(json) as { sha256: string }).sha256);
  return out;
}

// ------------------------------------------------------------- the reference ingest loop

/**
 * The single loop the ingest throughput is compared with: for each file, read it, JSON.parse it,
 * write it to a temp file, fsync, rename into place (fs/promises, one file at a time).
 */
export async function referenceLoop(files: readonly string[], outDir: string): Promise<number> {
  await mkdir(outDir, { recursive: true });
  const t0 = nowMs();
  let i = 0;
  for (const f of files) {
    const bytes = await readFile(f);
    JSON.parse(bytes.toString('utf8'));
    const tmp = join(outDir, `.${i++}.tmp`);
    const fh = await open(tmp, 'w');
    try {
      await fh.writeFile(bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, join(outDir, `${i}.json`));
  }
  return nowMs() - t0;
}

// ---------------------------------------------------------------- docs/BENCHMARKS.md sections

/**
 * Replace the generated block of section `name` in docs/BENCHMARKS.md (between
 * `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`), or append it at the end. The prose around
 * the markers is written by hand and kept.
 */
export async function writeDocSection(name: string, markdown: string): Promise<void> {
  const start = `<!-- bench:${name} -->`;
  const end = `<!-- /bench:${name} -->`;
  const block = `${start}\n${markdown.trim()}\n${end}`;
  let doc = existsSync(DOC_PATH) ? await readFile(DOC_PATH, 'utf8') : '# Benchmarks\n';
  const i = doc.indexOf(start);
  const j = doc.indexOf(end);
  if (i >= 0 && j > i) doc = doc.slice(0, i) + block + doc.slice(j + end.length);
  else doc = `${doc.trimEnd()}\n\n${block}\n`;
  await writeFile(DOC_PATH, doc);
  log(`wrote the "${name}" results into ${DOC_PATH}`);
}

export function table(header: readonly string[], rows: readonly (readonly string[])[], align?: readonly ('l' | 'r')[]): string {
  const a = align ?? header.map((_, i) => (i === 0 ? 'l' : 'r'));
  return [
    `| ${header.join(' | ')} |`,
    `|${a.map((x) => (x === 'l' ? '---' : '---:')).join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}

/** Write `count` files under `dir` (dot-names: the watcher ignores them until renamed). */
export async function stage(dir: string, items: readonly { name: string; bytes: Buffer }[]): Promise<{ tmp: string; final: string }[]> {
  const out: { tmp: string; final: string }[] = [];
  for (const it of items) {
    const tmp = join(dir, `.${it.name}.${randomBytes(3).toString('hex')}.tmp`);
    await writeFile(tmp, it.bytes);
    out.push({ tmp, final: join(dir, it.name) });
  }
  return out;
}

// ------------------------------------------------------------------------ background drops

/** bench/dropper.ts in a child process: drops other feeds at a fixed rate while a bench measures. */
export class Dropper {
  private constructor(private readonly child: ChildProcess) {}

  static async start(feeds: readonly FixtureFeed[], bytes: number): Promise<Dropper> {
    const child = spawn(process.execPath, ['--import', 'tsx', join(BENCH_DIR, 'dropper.ts')], {
      cwd: ROOT,
      env: { ...process.env, DROPPER: JSON.stringify({ feeds, bytes }) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const d = new Dropper(child);
    onCleanup(async () => {
      if (child.connected) child.disconnect();
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    });
    await new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code) => reject(new Error(`dropper exited (${code})`)));
    });
    return d;
  }

  get pid(): number {
    return this.child.pid!;
  }

  begin(inbox: string, rate: number): void {
    this.child.send({ cmd: 'start', inbox, rate });
  }

  end(): Promise<{ sent: number; ms: number }> {
    return new Promise((resolve) => {
      const on = (m: { stopped?: boolean; sent: number; ms: number }) => {
        if (!m.stopped) return;
        this.child.off('message', on);
        resolve({ sent: m.sent, ms: m.ms });
      };
      this.child.on('message', on);
      this.child.send({ cmd: 'stop' });
    });
  }
}

/** Wait until the system's inbox and .processing are empty; false after timeoutMs. */
export async function waitDrained(sys: System, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await sys.drained()) return true;
    await sleep(25);
  }
  return false;
}

// ---------------------------------------------------------------- rounds shared by benches

export interface DropResult {
  readonly fresh: number;
  readonly t0: number;
  readonly served: number;
  readonly polls: number;
  readonly etag: string;
  readonly sha256: string;
  readonly generatedAt: string;
}

/** Drop a new version of `tmpl` (dot-name, then rename) and poll until it is served. */
export async function dropAndPoll(sys: System, poller: Poller, tmpl: DocTemplate, previous: string | undefined, timeoutMs = 10_000): Promise<DropResult> {
  const v = version(tmpl);
  const tmp = join(sys.inbox, `.fresh-${process.pid}.tmp`);
  await writeFile(tmp, v.bytes);
  const t0 = nowMs();
  await rename(tmp, join(sys.inbox, tmpl.feed.filename));
  const r = await poller.until(`/v1/data/${tmpl.feed.filename}`, v.etag, previous, timeoutMs);
  return { fresh: r ? r.at - t0 : Number.POSITIVE_INFINITY, t0, served: r?.at ?? Number.NaN, polls: r?.polls ?? 0, etag: v.etag, sha256: v.sha256, generatedAt: v.generatedAt };
}

/**
 * One ingest round: a new version of every template renamed into the inbox at once; resolves when
 * they are settled (inbox and .processing empty, the catalog holds every new version). Seconds,
 * and the CPU the system's processes spent (measured once they are idle again).
 */
export async function ingestRound(
  sys: OddsfilesSystem,
  templates: readonly DocTemplate[],
  redis: Redis,
  quiet: () => number[],
  timeoutMs = 120_000,
): Promise<{ seconds: number; cpuMs: number; settled: boolean }> {
  const versions = templates.map((t) => ({ name: t.feed.filename, ...version(t) }));
  const staged = await stage(sys.inbox, versions);
  await quiesce(quiet());
  const cpu0 = sys.pids().reduce((a, p) => a + cpuMs(p), 0);
  const t0 = nowMs();
  for (const s of staged) await rename(s.tmp, s.final);
  const deadline = Date.now() + timeoutMs;
  const poll = templates.length > 500 ? 50 : 5;
  let settled = false;
  for (;;) {
    if (await sys.drained()) {
      const shas = await catalogShas(redis, sys.catalogKey);
      if (versions.every((x) => shas.get(x.name) === x.sha256)) {
        settled = true;
        break;
      }
    }
    if (Date.now() > deadline) break;
    await sleep(poll);
  }
  const seconds = (nowMs() - t0) / 1000;
  await quiesce(quiet(), { maxMs: 30_000 });
  return { seconds, cpuMs: sys.pids().reduce((a, p) => a + cpuMs(p), 0) - cpu0, settled };
}

/** The reference loop over new versions of the same templates (files staged first). */
export async function referenceRound(dir: string, templates: readonly DocTemplate[], quiet: () => number[]): Promise<{ seconds: number; cpuMs: number }> {
  const versions = templates.map((t) => ({ name: t.feed.filename, ...version(t) }));
  await mkdir(dir, { recursive: true });
  const staged = await stage(dir, versions);
  await quiesce(quiet());
  const c0 = process.cpuUsage();
  const ms = await referenceLoop(staged.map((s) => s.tmp), join(dir, 'out'));
  const c = process.cpuUsage(c0);
  await rm(dir, { recursive: true, force: true });
  return { seconds: ms / 1000, cpuMs: (c.user + c.system) / 1000 };
}

// ----------------------------------------------------------------------- CPU profiles

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

/** Where a profile frame belongs: a package, a file of the project, a Node module, or a V8 bucket. */
function groupOf(frame: ProfileNode['callFrame']): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : `(native) ${functionName}`;
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (nm) return nm[1]!;
  const src = /\/dist\/((?:src|workers)\/.*?)\.js$/.exec(url);
  if (src) return src[1]!;
  if (url.startsWith('node:')) return url.replace(/^node:internal\//, 'node:').split('/').slice(0, 2).join('/');
  return url;
}

/**
 * Self time of a V8 .cpuprofile grouped by package / project file / Node module, and the top
 * functions; idle time left out (shares are of the busy time).
 */
export function summarizeProfile(path: string, top = 12): { busyMs: number; groups: [string, number][]; functions: [string, number][] } {
  const p = JSON.parse(readFileSync(path, 'utf8')) as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const groups = new Map<string, number>();
  const fns = new Map<string, number>();
  let busy = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const node = byId.get(p.samples[i]!);
    const dt = (p.timeDeltas[i + 1] ?? 0) / 1000;
    if (!node || node.callFrame.functionName === '(idle)') continue;
    busy += dt;
    const g = groupOf(node.callFrame);
    groups.set(g, (groups.get(g) ?? 0) + dt);
    const f = `${node.callFrame.functionName || '(anonymous)'} ${g}${node.callFrame.url ? `:${node.callFrame.lineNumber + 1}` : ''}`;
    fns.set(f, (fns.get(f) ?? 0) + dt);
  }
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).slice(0, top);
  return { busyMs: busy, groups: sorted(groups), functions: sorted(fns) };
}

/** A TCP port free on 127.0.0.1 right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/**
 * The example registry as the reader benches publish it: `big` at 200 KB, every other feed about
 * 4 KB; renamed into the inbox at once, and resolved once the catalog holds every version.
 */
export async function publishExampleSet(sys: OddsfilesSystem, big: string): Promise<{ name: string; bytes: Buffer; sha256: string }[]> {
  const redis = new Redis(REDIS_URL);
  try {
    const versions = EXAMPLE_FEEDS.map((f) => ({ name: f.filename, ...version(docTemplate(f, f.filename === big ? 200 * 1024 : 4000)) }));
    for (const s of await stage(sys.inbox, versions)) await rename(s.tmp, s.final);
    for (;;) {
      const shas = await catalogShas(redis, sys.catalogKey);
      if ((await sys.drained()) && versions.every((v) => shas.get(v.name) === v.sha256)) return versions;
      await sleep(20);
    }
  } finally {
    redis.disconnect();
  }
}
