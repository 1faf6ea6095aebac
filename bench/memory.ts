/**
 * Memory: the reader's RSS (VmRSS / VmHWM from /proc/<pid>/status) once N files of S bytes are
 * published and held (identity + gzip + br), against the budget 100 MB + 3 × published bytes; and
 * what one large drop costs a worker-only process (VmHWM after − VmRSS before), against about twice
 * its size.
 *
 * The reader's RSS is read once its processes are idle, again `--settle-s` seconds later
 * ("settled": V8's memory reducer gives back the heap the publishing rounds grew some seconds after
 * allocation stops; the target is checked on this one), and at the end of `--busy-s` seconds of
 * `GET /v1/files` under load ("busy": a reader serving traffic all the time keeps the heap a busy
 * process grows, so that is what a container limit must hold).
 *
 * References measured in the same run: the reader's own RSS before anything is published, a bare
 * Node process holding the same bytes and their gzip and br variants in Buffers, and, for the
 * worker, a bare Node process that reads the same file and JSON.parses it.
 */
import { spawn } from 'node:child_process';
import { rename } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { EXAMPLE_FEEDS, type FixtureFeed } from '../test/fixtures/corpus.js';
import { TEST_REDIS_URL } from '../test/helpers/redis.js';
import { ROOT } from '../test/helpers/service.js';
import { benchArgs, commandLine, envOf } from './lib/common/cli.js';
import { docTemplate, generatedRegistry, MANY_SPORTS, stage, versions, type DocTemplate } from './lib/common/drops.js';
import { runLoad, loadTool } from './lib/common/load.js';
import { machineInfo, machineLine } from './lib/common/machine.js';
import { OddsfilesSystem } from './lib/common/oddsfiles-system.js';
import { Poller } from './lib/common/poller.js';
import { memOf, quiesce } from './lib/common/proc.js';
import { publishReport, table } from './lib/common/report.js';
import { waitSettled } from './lib/common/rounds.js';
import { log, runMain } from './lib/common/run.js';
import { fmtMs, fmtX } from './lib/common/stats.js';

const args = benchArgs("Memory: the reader's RSS against its budget, and what one large drop costs a worker.", {
  'big-mb': { type: 'number', default: 50, quick: 5, description: 'size of the drop of the worker part, MB' },
  'settle-s': { type: 'number', default: 15, quick: 1, description: 'seconds between the idle and the settled RSS reading' },
  'busy-s': { type: 'number', default: 5, quick: 1, description: 'seconds of GET /v1/files load before the busy RSS reading (0: none)' },
  env: { type: 'strings', description: 'NAME=VALUE in the environment of the oddsfiles processes (e.g. MALLOC_ARENA_MAX=2, as the Docker image sets)' },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});
const BIG_MB = args['big-mb'];
const WRITE_DOC = !args['no-doc'] && !args.quick;
const SETTLE_S = args['settle-s'];
const BUSY_S = args['busy-s'];
const EXTRA_ENV = envOf(args.env);
const MB = 1e6;

interface ReaderCase {
  readonly name: string;
  readonly feeds: readonly FixtureFeed[];
  readonly bytes: number;
  readonly config?: Record<string, unknown>;
}

const mb = (b: number) => (b / MB).toFixed(1);

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const many = generatedRegistry(19, MANY_SPORTS);
  const cases: ReaderCase[] = args.quick
    ? [{ name: '38 files × 20 KB', feeds: EXAMPLE_FEEDS, bytes: 20 * 1024 }]
    : [
        { name: '38 files × 200 KB', feeds: EXAMPLE_FEEDS, bytes: 200 * 1024 },
        { name: '38 files × 2 MB', feeds: EXAMPLE_FEEDS, bytes: 2 * 1024 * 1024 },
        { name: '380 files × 200 KB', feeds: many.feeds, bytes: 200 * 1024, config: many.config },
      ];
  const readerRows: string[][] = [];
  for (const c of cases) readerRows.push(await readerCase(c));

  const worker = await workerCase();
  readerRows.push(worker.readerRow);

  const out = [
    machineLine(machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`. The reader runs alone in its process (\`oddsfiles start --roles reader\`), fed by a watcher+worker process; each case publishes every file twice (the second round replaces every version), waiting each time until the reader serves the br variant of every file, and reads VmRSS/VmHWM once the processes are idle, and VmRSS again ${SETTLE_S} s later ("settled": V8 gives back the heap the rounds grew some seconds after allocation stops), then at the end of ${BUSY_S} s of \`GET /v1/files\` under load (${loadTool}, 16 connections: "busy", what a reader serving traffic holds); the target is checked on the settled and busy RSS and on the peak VmHWM${
      Object.keys(EXTRA_ENV).length
        ? `; environment of the oddsfiles processes: ${Object.entries(EXTRA_ENV)
            .map(([k, v]) => `\`${k}=${v}\``)
            .join(', ')}`
        : ''
    }. "bare holder": a Node process holding the same current bytes with their gzip (level 6) and br (quality 5) variants in Buffers. MB = 10⁶ bytes.`,
    '',
    table(
      [
        'published',
        'bytes held',
        'reader RSS empty',
        'RSS after 1st round',
        'RSS after 2nd round',
        `settled (${SETTLE_S} s later)`,
        `busy (${BUSY_S} s of load)`,
        'VmHWM',
        'budget 100 MB + 3×',
        '(settled − empty) / published',
        'bare holder RSS',
        'settled / bare holder',
        'within budget',
      ],
      readerRows,
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
    ),
    '',
    `Worker, one ${mb(worker.size)} MB drop (a worker-only process, \`--roles worker\`, with the watcher in its own process): VmRSS before, VmHWM after, and the same for a bare Node process that reads the file and JSON.parses it, and one that only reads it.`,
    '',
    table(['process', 'RSS before', 'VmHWM after', 'peak − before', '÷ drop size', 'target ≤ ~2×'], worker.rows, ['l', 'r', 'r', 'r', 'r', 'l']),
    '',
    `The drop's own timings (worker log): ${worker.timings}.`,
  ].join('\n');
  await publishReport('memory', out, WRITE_DOC);
}

/** Publish every feed (one version each) and wait until the reader holds each one's br variant. */
async function publishAll(sys: OddsfilesSystem, templates: readonly DocTemplate[], redis: Redis, poller: Poller | undefined): Promise<number> {
  const vs = versions(templates);
  // In batches, as publishers would, so the inbox never holds hundreds of MB at once.
  for (let i = 0; i < vs.length; i += 40) {
    const batch = vs.slice(i, i + 40);
    for (const s of await stage(sys.inbox, batch)) await rename(s.tmp, s.final);
    if (!(await waitSettled(sys, redis, batch, 180_000, 20))) throw new Error('publishing did not settle in 180 s');
  }
  if (poller) for (const v of vs) await poller.untilHeld(`/v1/data/${v.name}`, `"${v.sha256.slice(0, 32)}-br"`, { 'accept-encoding': 'br' }, 120_000);
  return vs.reduce((s, v) => s + v.bytes.length, 0);
}

async function readerCase(c: ReaderCase): Promise<string[]> {
  log(`reader: ${c.name}…`);
  const templates = c.feeds.map((f) => docTemplate(f, c.bytes));
  const sys = await OddsfilesSystem.start({ label: 'mem-reader', shape: 'pair', config: c.config, env: EXTRA_ENV });
  const redis = new Redis(TEST_REDIS_URL);
  const poller = new Poller(sys.readerUrl!, sys.key);
  try {
    const readerPid = sys.reader!.pid;
    await sleep(1000);
    await quiesce(sys.pids());
    const empty = memOf(readerPid).rss;
    await publishAll(sys, templates, redis, poller);
    await quiesce(sys.pids());
    const first = memOf(readerPid).rss;
    const published = await publishAll(sys, templates, redis, poller);
    await quiesce(sys.pids());
    const idle = memOf(readerPid).rss;
    const m = await settled(readerPid);
    const b = await busy(readerPid, sys.readerUrl!, sys.key);
    const holder = await bareHolder(sys, redis);
    const budget = 100 * MB + 3 * published;
    return [
      c.name,
      `${mb(published)} MB`,
      `${mb(empty)} MB`,
      `${mb(first)} MB`,
      `${mb(idle)} MB`,
      `${mb(m.rss)} MB`,
      b ? `${mb(b.rss)} MB` : '—',
      `${mb((b ?? m).hwm)} MB`,
      `${mb(budget)} MB`,
      fmtX((m.rss - empty) / published),
      `${mb(holder)} MB`,
      fmtX(m.rss / holder),
      verdict(m, b, budget),
    ];
  } finally {
    poller.close();
    redis.disconnect();
    await sys.stop();
  }
}

/** RSS of a bare Node process holding the current version of every file, gzip and br too. */
async function bareHolder(sys: OddsfilesSystem, redis: Redis): Promise<number> {
  const flat = await redis.hgetall(sys.catalogKey);
  const objects = Object.values(flat).map((j) => join(sys.dataDir, 'store', (JSON.parse(j) as { object: string }).object));
  const code = `
    import { readFileSync } from 'node:fs';
    import { gzipSync, brotliCompressSync, constants } from 'node:zlib';
    const held = [];
    for (const f of JSON.parse(process.env.OBJECTS)) {
      const b = readFileSync(f);
      held.push(b, gzipSync(b, { level: 6 }), brotliCompressSync(b, { params: { [constants.BROTLI_PARAM_QUALITY]: 5, [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT, [constants.BROTLI_PARAM_SIZE_HINT]: b.length } }));
    }
    await new Promise((r) => setTimeout(r, 300));
    process.stdout.write(String(process.memoryUsage().rss) + '\\n');`;
  return Number(await runNode(code, { OBJECTS: JSON.stringify(objects) }));
}

/** The process's memory SETTLE_S seconds from now (V8's memory reducer has run by then). */
async function settled(pid: number): Promise<{ rss: number; hwm: number }> {
  await sleep(SETTLE_S * 1000);
  return memOf(pid);
}

/** The reader's memory at the end of BUSY_S seconds of GET /v1/files under load (undefined when BUSY_S is 0). */
async function busy(pid: number, base: string, key: string): Promise<{ rss: number; hwm: number } | undefined> {
  if (BUSY_S <= 0) return undefined;
  await runLoad({ url: `${base}/v1/files`, headers: { 'x-api-key': key }, connections: 16, seconds: BUSY_S });
  return memOf(pid);
}

function verdict(m: { rss: number; hwm: number }, b: { rss: number; hwm: number } | undefined, budget: number): string {
  const yes = (v: number) => (v <= budget ? 'yes' : '**no**');
  return `settled ${yes(m.rss)}${b ? `, busy ${yes(b.rss)}` : ''}, peak ${yes((b ?? m).hwm)}`;
}

function runNode(code: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.once('exit', (codeNo) => (codeNo === 0 ? resolve(out.trim()) : reject(new Error(`node -e exited ${codeNo}`))));
  });
}

/** A bare Node process reading the object (and parsing it): its RSS before and its peak. */
async function bareRead(object: string, parse: boolean): Promise<{ before: number; hwm: number }> {
  const code = `
    import { readFileSync } from 'node:fs';
    const mem = () => Object.fromEntries(readFileSync('/proc/self/status', 'utf8').split('\\n').filter((l) => l.startsWith('Vm')).map((l) => [l.split(':')[0], Number(l.split(/\\s+/)[1]) * 1024]));
    await new Promise((r) => setTimeout(r, 200));
    const before = mem().VmRSS;
    const bytes = readFileSync(process.env.OBJECT);
    ${parse ? 'const doc = JSON.parse(bytes.toString("utf8")); if (!doc.generated_at) throw new Error("?");' : ''}
    process.stdout.write(JSON.stringify({ before, hwm: mem().VmHWM }) + '\\n');`;
  return JSON.parse(await runNode(code, { OBJECT: object })) as { before: number; hwm: number };
}

async function workerCase(): Promise<{ rows: string[][]; readerRow: string[]; timings: string; size: number }> {
  log(`worker: one ${BIG_MB} MB drop…`);
  const feed = EXAMPLE_FEEDS.find((f) => f.filename === 'site_pregame_northwind_soccer.json')!;
  const template = docTemplate(feed, BIG_MB * MB);
  // watcher | worker | reader, one process each: the worker's peak is its own.
  const sys = await OddsfilesSystem.start({ label: 'mem-worker', shape: 'split', env: EXTRA_ENV });
  const redis = new Redis(TEST_REDIS_URL);
  const poller = new Poller(sys.readerUrl!, sys.key);
  try {
    const workerPid = sys.worker.pid;
    const readerPid = sys.reader!.pid;
    await sleep(1000);
    await quiesce(sys.pids());
    const before = memOf(workerPid).rss;
    const readerEmpty = memOf(readerPid).rss;
    const size = await publishAll(sys, [template], redis, poller);
    await quiesce(sys.pids());
    const after = memOf(workerPid).hwm;
    const readerIdle = memOf(readerPid).rss;
    const reader = await settled(readerPid);
    const readerBusy = await busy(readerPid, sys.readerUrl!, sys.key);
    const line = sys.procs.flatMap((p) => p.readLines('"jobId"')).find((l) => l.outcome === 'published');
    const t = (line?.timings ?? {}) as Record<string, number>;
    const timings = Object.entries(t)
      .map(([k, v]) => `${k} ${fmtMs(v)} ms`)
      .join(', ');

    // The same file for the bare processes: what the store holds.
    const flat = await redis.hgetall(sys.catalogKey);
    const object = join(sys.dataDir, 'store', (JSON.parse(Object.values(flat)[0]!) as { object: string }).object);
    const parsed = await bareRead(object, true);
    const readOnly = await bareRead(object, false);
    const row = (name: string, b: number, h: number, target: boolean) => [
      name,
      `${mb(b)} MB`,
      `${mb(h)} MB`,
      `${mb(h - b)} MB`,
      fmtX((h - b) / size),
      target ? ((h - b) / size <= 2.2 ? 'met' : '**missed**') : '',
    ];
    const budget = 100 * MB + 3 * size;
    return {
      size,
      timings,
      rows: [
        row('oddsfiles worker (`--roles worker`)', before, after, true),
        row('bare: read + JSON.parse', parsed.before, parsed.hwm, false),
        row('bare: read only', readOnly.before, readOnly.hwm, false),
      ],
      readerRow: [
        `1 file × ${BIG_MB} MB (once)`,
        `${mb(size)} MB`,
        `${mb(readerEmpty)} MB`,
        `${mb(readerIdle)} MB`,
        '—',
        `${mb(reader.rss)} MB`,
        readerBusy ? `${mb(readerBusy.rss)} MB` : '—',
        `${mb((readerBusy ?? reader).hwm)} MB`,
        `${mb(budget)} MB`,
        fmtX((reader.rss - readerEmpty) / size),
        '—',
        '—',
        verdict(reader, readerBusy, budget),
      ],
    };
  } finally {
    poller.close();
    redis.disconnect();
    await sys.stop();
  }
}

runMain(main);
