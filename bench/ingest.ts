/**
 * Ingest throughput: drops settled per second for rounds of all 38 filenames of the example
 * registry, 200 KB each, renamed into the inbox at once. Settled: the inbox and .processing are
 * empty and the catalog holds all 38 new versions. Compared, in the same run, with a single loop
 * doing only read + JSON.parse + write + fsync + rename of the same files (the reference).
 *
 *   npx tsx bench/ingest.ts [--rounds 6] [--kb 200] [--no-doc]
 *   npx tsx bench/ingest.ts --profile [--rounds 6]   # V8 CPU profiles of two variants instead
 *   npx tsx bench/ingest.ts --variants default,single [--baseline DIR]   # an A/B, no doc written
 *
 * --variants picks some of: single, c1, default, c16, two, pool32. --baseline DIR runs each picked
 * variant a second time from another build (DIR/dist/workers/oddsfiles.js, e.g. a `git worktree`
 * of the commit before a change, built), in the same interleaved rounds.
 *
 * Variants, all started side by side and measured in interleaved rounds (order shuffled per
 * round, the reference included): every role in one process (`npm start`), watcher+worker with
 * ingest.concurrency 1, 4 (the default) and 16, watcher+worker plus a second worker process, and
 * concurrency 16 with a larger libuv thread pool (fsync holds one of its 4 threads).
 */
import { join, resolve } from 'node:path';
import { readdir, rename } from 'node:fs/promises';
import { Redis } from 'ioredis';
import {
  catalogShas,
  cpuMs,
  docTemplate,
  EXAMPLE_FEEDS,
  fmtInt,
  fmtMs,
  fmtX,
  log,
  machineInfo,
  machineLine,
  median,
  nowMs,
  OddsfilesSystem,
  quiesce,
  REDIS_URL,
  referenceLoop,
  runMain,
  shuffle,
  sleep,
  stage,
  summarizeProfile,
  table,
  tempDir,
  version,
  writeDocSection,
  type OddsfilesOptions,
  numberArg,
  stringArg,
} from './common.js';

const args = process.argv.slice(2);
const opt = (name: string, fallback: number) => numberArg(name, fallback, args);
const ROUNDS = opt('rounds', 6);
const KB = opt('kb', 200);
const PROFILE = args.includes('--profile');
const PICKED = stringArg('variants', undefined, args)?.split(',');
const BASELINE = stringArg('baseline', undefined, args);
const WRITE_DOC = !args.includes('--no-doc') && !PROFILE && !PICKED && !BASELINE;

interface Variant {
  /** Its short name for --variants. */
  readonly id?: string;
  readonly name: string;
  readonly options: Omit<OddsfilesOptions, 'label'>;
  sys?: OddsfilesSystem;
  readonly seconds: number[];
  /** CPU ms of all the variant's processes per round. */
  readonly cpu: number[];
}

let profileDir: string | undefined;

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const templates = EXAMPLE_FEEDS.map((f) => docTemplate(f, KB * 1024));
  const totalBytes = templates.reduce((s, t) => s + t.bytes.length, 0);
  const variants: Variant[] = [
    { id: 'single', name: 'one process, all roles (`npm start`), concurrency 4', options: { shape: 'single' }, seconds: [], cpu: [] },
    { id: 'c1', name: 'watcher+worker, concurrency 1', options: { shape: 'ingest', config: { ingest: { concurrency: 1 } } }, seconds: [], cpu: [] },
    { id: 'default', name: 'watcher+worker, concurrency 4 (default)', options: { shape: 'ingest' }, seconds: [], cpu: [] },
    { id: 'c16', name: 'watcher+worker, concurrency 16', options: { shape: 'ingest', config: { ingest: { concurrency: 16 } } }, seconds: [], cpu: [] },
    { id: 'two', name: 'watcher+worker + a 2nd worker process, concurrency 4 each', options: { shape: 'ingest', extraWorkers: 1 }, seconds: [], cpu: [] },
    {
      id: 'pool32',
      name: 'watcher+worker, concurrency 16, `UV_THREADPOOL_SIZE=32`',
      options: { shape: 'ingest', config: { ingest: { concurrency: 16 } }, env: { UV_THREADPOOL_SIZE: '32' } },
      seconds: [],
      cpu: [],
    },
  ];
  if (PICKED) {
    const unknown = PICKED.filter((id) => !variants.some((v) => v.id === id));
    if (unknown.length > 0) throw new Error(`unknown variants: ${unknown.join(', ')} (known: ${variants.map((v) => v.id).join(', ')})`);
    variants.splice(0, variants.length, ...variants.filter((v) => PICKED.includes(v.id!)));
  }
  if (BASELINE) {
    const bin = resolve(BASELINE, 'dist', 'workers', 'oddsfiles.js');
    variants.push(...variants.map((v) => ({ name: `${v.name}, baseline`, options: { ...v.options, bin }, seconds: [], cpu: [] })));
  }
  if (PROFILE) {
    // Only the default watcher+worker and the one process, under --cpu-prof; the profiles are
    // written when they stop, then summarised (self time by package / file, idle left out).
    const profDir = await tempDir('ingest-prof');
    variants.splice(0, variants.length, variants[0]!, variants[2]!);
    for (const v of variants) (v.options as { nodeArgs?: string[] }).nodeArgs = ['--cpu-prof', `--cpu-prof-dir=${join(profDir, String(variants.indexOf(v)))}`];
    profileDir = profDir;
  }
  log('starting the variants…');
  for (const [i, v] of variants.entries()) v.sys = await OddsfilesSystem.start({ label: `ingest${i}`, ...v.options });
  const redis = new Redis(REDIS_URL);
  const refDir = await tempDir('ingest-ref');
  const refSeconds: number[] = [];
  const refCpu: number[] = [];
  const allPids = () => variants.flatMap((v) => v.sys!.pids());

  const runVariant = async (v: Variant): Promise<number> => {
    const sys = v.sys!;
    const versions = templates.map((t) => ({ name: t.feed.filename, ...version(t) }));
    const staged = await stage(sys.inbox, versions);
    await quiesce(allPids());
    const cpu0 = sys.pids().reduce((a, p) => a + cpuMs(p), 0);
    const t0 = nowMs();
    for (const s of staged) await rename(s.tmp, s.final);
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (await sys.drained()) {
        const shas = await catalogShas(redis, sys.catalogKey);
        if (versions.every((x) => shas.get(x.name) === x.sha256)) break;
      }
      if (Date.now() > deadline) throw new Error(`${v.name}: not settled after 120 s`);
      await sleep(5);
    }
    const s = (nowMs() - t0) / 1000;
    await quiesce(allPids());
    // After quiesce: what the round cost in all, compression and manifest writes included.
    v.cpu.push(sys.pids().reduce((a, p) => a + cpuMs(p), 0) - cpu0);
    return s;
  };
  const runReference = async (): Promise<number> => {
    const versions = templates.map((t) => ({ name: t.feed.filename, ...version(t) }));
    const staged = await stage(refDir, versions);
    await quiesce(allPids());
    const cpu0 = process.cpuUsage();
    const ms = await referenceLoop(staged.map((s) => s.tmp), join(refDir, 'out'));
    const c = process.cpuUsage(cpu0);
    refCpu.push((c.user + c.system) / 1000);
    return ms / 1000;
  };

  log('warm-up round…');
  await runReference();
  for (const v of variants) await runVariant(v);
  refCpu.length = 0;
  for (const v of variants) v.cpu.length = 0;
  for (const v of variants) v.sys!.procs.forEach((p) => p.readLines('"jobId"'));

  const started = Date.now();
  for (let r = 0; r < ROUNDS; r++) {
    const order: (Variant | 'ref')[] = shuffle(['ref', ...variants]);
    const parts: string[] = [];
    for (const v of order) {
      if (v === 'ref') {
        const s = await runReference();
        refSeconds.push(s);
        parts.push(`ref ${fmtInt(templates.length / s)}/s`);
      } else {
        const s = await runVariant(v);
        v.seconds.push(s);
        parts.push(`${v.name.slice(0, 28)} ${fmtInt(templates.length / s)}/s`);
      }
    }
    log(`round ${r + 1}: ${parts.join(' | ')}`);
  }
  const measuredS = Math.round((Date.now() - started) / 1000);
  redis.disconnect();

  // Per-drop timings from the workers' log lines of the measured rounds.
  const timingRows: string[][] = [];
  for (const v of variants) {
    const lines = v.sys!.procs.flatMap((p) => p.readLines('"jobId"')).filter((l) => l.outcome === 'published');
    const t = (k: string) => median(lines.map((l) => (l.timings as Record<string, number>)[k] ?? Number.NaN));
    const rv = median(lines.map((l) => ((l.timings as Record<string, number>).read ?? Number.NaN) + ((l.timings as Record<string, number>).validate ?? 0)));
    timingRows.push([v.name, String(lines.length), fmtMs(rv), fmtMs(t('store')), fmtMs(t('commit')), fmtMs(t('total')), fmtMs(median(lines.map((l) => l.lagMs as number)))]);
  }
  for (const v of variants) await v.sys!.stop();
  if (profileDir) {
    const lines: string[] = [];
    for (const [i, v] of variants.entries()) {
      const dir = join(profileDir, String(i));
      for (const f of await readdir(dir)) {
        const s = summarizeProfile(join(dir, f));
        const proc = v.sys!.procs.find((p) => f.includes(String(p.pid)));
        lines.push(`### ${v.name}, process ${proc ? proc.roles.join('+') : f}: ${fmtInt(s.busyMs)} ms busy (${fmtMs(s.busyMs / (ROUNDS * templates.length + templates.length))} ms per drop, warm-up included)`);
        lines.push('', table(['self time by package / file', 'ms', 'share'], s.groups.map(([g, ms]) => [g, fmtInt(ms), `${Math.round((ms / s.busyMs) * 100)} %`])), '');
        lines.push(table(['top functions (self)', 'ms', 'share'], s.functions.map(([g, ms]) => [g.replace(/\|/g, '/'), fmtInt(ms), `${Math.round((ms / s.busyMs) * 100)} %`])), '');
      }
    }
    process.stdout.write(`\n${lines.join('\n')}\n`);
    return;
  }

  const refRate = templates.length / median(refSeconds);
  // CPU per drop over all rounds together: /proc counts in 10 ms ticks, a round's ~100–150 ms of
  // CPU by whole ticks, so one round's figure is off by up to 0.5 ms per drop (a median of them
  // moved in steps of 0.26 ms); the sum of all rounds is off by one or two ticks in all.
  const cpuPerDrop = (cpu: readonly number[]) => cpu.reduce((a, b) => a + b, 0) / cpu.length / templates.length;
  const rows: string[][] = [
    [
      'reference loop (read + JSON.parse + write + fsync + rename)',
      fmtInt(refRate),
      `${fmtInt(templates.length / Math.max(...refSeconds))}–${fmtInt(templates.length / Math.min(...refSeconds))}`,
      (totalBytes / median(refSeconds) / 1e6).toFixed(0),
      '1.00×',
      fmtMs(cpuPerDrop(refCpu)),
      '',
    ],
  ];
  for (const v of variants) {
    const rate = templates.length / median(v.seconds);
    rows.push([
      v.name,
      fmtInt(rate),
      `${fmtInt(templates.length / Math.max(...v.seconds))}–${fmtInt(templates.length / Math.min(...v.seconds))}`,
      (totalBytes / median(v.seconds) / 1e6).toFixed(0),
      fmtX(rate / refRate),
      fmtMs(cpuPerDrop(v.cpu)),
      rate / refRate >= 0.7 ? 'met' : '**missed**',
    ]);
  }
  const out = [
    machineLine(machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`npx tsx bench/ingest.ts${args.length ? ` ${args.join(' ')}` : ''}\`; rounds of ${templates.length} drops (every example filename, ${(totalBytes / templates.length / 1024).toFixed(0)} KB each, ${(totalBytes / 1e6).toFixed(1)} MB), ${ROUNDS} rounds after a warm-up, every variant and the reference once per round in shuffled order, each started only once the previous one's processes are idle; medians; ${measuredS} s of measurement.`,
    '',
    table(['variant', 'drops/s (median)', 'range', 'MB/s', 'vs reference', 'CPU ms per drop', 'target ≥ 0.7×'], rows, ['l', 'r', 'r', 'r', 'r', 'r', 'l']),
    '',
    'CPU ms per drop: user + system time of all the variant\'s processes over all rounds (each until they are idle again: compression in the reader and manifest writes included) / the drops of all rounds (summed, not a median of rounds: /proc counts CPU in 10 ms ticks); for the reference, the loop\'s own process.',
    '',
    "Per drop, from the workers' log lines (median ms; read+validate: the worker's `read` + `validate` laps (since 8f23389 `read` includes validation and `validate` is the sha256); `store` includes the `catalog.get` before it; lag: job's `receivedAt` → logged, so it includes waiting in the queue):",
    '',
    table(['variant', 'drops', 'read+validate', 'store', 'commit', 'total', 'lag'], timingRows),
  ].join('\n');
  process.stdout.write(`\n${out}\n`);
  if (WRITE_DOC) await writeDocSection('ingest', out);
}

runMain(main);
