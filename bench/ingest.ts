/**
 * Ingest throughput: drops settled per second for rounds of all 38 filenames of the example
 * registry renamed into the inbox at once. Settled: the inbox and .processing are empty and the
 * catalog holds every new version. Compared, in the same run, with a single loop doing only read +
 * JSON.parse + write + fsync + rename of the same files (the reference), and with the same loop
 * made durable (each feed's folder fsynced after its rename, as the store does: the floor of a
 * publication that survives a crash).
 *
 * Variants, started side by side and measured in interleaved rounds (order shuffled per round, the
 * reference included): every role in one process (`npm start`), watcher+worker with
 * ingest.concurrency 1, 4 (the default) and 16, with drops checked on a validation thread (the
 * default) or on the event loop, watcher+worker plus a second worker process, and concurrency 16
 * with a larger libuv thread pool (fsync holds one of its 4 threads); and two
 * floors of the same architecture, not oddsfiles: the bare pipeline of the freshness benches
 * (bench/lib/bare/pipeline.ts), straight from its watcher and through a BullMQ queue. `--baseline`
 * runs each picked variant a second time from another build, in the same rounds: an A/B of a
 * change. `--profile` takes V8 CPU profiles of two variants instead of the table.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { EXAMPLE_FEEDS } from '../test/fixtures/corpus.js';
import { TEST_REDIS_URL } from '../test/helpers/redis.js';
import { benchArgs, commandLine } from './lib/common/cli.js';
import { docTemplate, type DocTemplate } from './lib/common/drops.js';
import { machineInfo, machineLine } from './lib/common/machine.js';
import { BareSystem } from './lib/bare/system.js';
import { builtEntry, OddsfilesSystem, type OddsfilesOptions } from './lib/common/oddsfiles-system.js';
import { profileTables, summarizeProfile } from './lib/common/profile.js';
import { publishReport, table } from './lib/common/report.js';
import { ingestRound, referenceRound } from './lib/common/rounds.js';
import { liveThreadsCpuMs, quiesce } from './lib/common/proc.js';
import { log, runMain, tempDir } from './lib/common/run.js';
import { fmtInt, fmtMs, fmtX, median, quantile, shuffle } from './lib/common/stats.js';

const VARIANT_IDS = [
  'single',
  'single8',
  'single-vt0',
  'c1',
  'default',
  'vt0',
  'vt2',
  'c8',
  'c8pool16',
  'c16',
  'two',
  'two-vt0',
  'pool32',
  'bare',
  'bare-queue',
  'bare-queue16',
];

const args = benchArgs('Ingest throughput: drops settled per second, against a read + parse + write + fsync + rename loop.', {
  rounds: { type: 'number', default: 6, quick: 1, description: 'measured rounds (after one warm-up round)' },
  kb: { type: 'number', default: 200, quick: 20, description: 'size of each drop, KiB' },
  variants: {
    type: 'string',
    description: `comma-separated variants to run, of ${VARIANT_IDS.join(', ')} (default: all; with --quick: default); no doc written`,
  },
  baseline: {
    type: 'string',
    description:
      'a checkout of another build (its dist/bin/oddsfiles.js, or dist/workers/oddsfiles.js in builds before bin/): each variant runs from it too, in the same rounds (a before/after in one run)',
  },
  'baseline-variants': {
    type: 'string',
    description: 'comma-separated variants that --baseline runs (default: every picked one; leave out those whose configuration the other build does not know)',
  },
  profile: { type: 'boolean', description: 'V8 CPU profiles of the one-process and the default variants instead of the table' },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});
const ROUNDS = args.rounds;
const KB = args.kb;
const PROFILE = args.profile;
// A profile is of the one-process and the default variants; a smoke run needs one variant.
const PICKED = (PROFILE ? 'single,default' : (args.variants ?? (args.quick ? 'default' : undefined)))?.split(',');
const BASELINE = args.baseline;
const WRITE_DOC = !args['no-doc'] && !args.quick && !PROFILE && !PICKED;

interface Variant {
  /** Its short name for --variants. */
  readonly id?: string;
  readonly name: string;
  readonly options: Omit<OddsfilesOptions, 'label'>;
  /** Not oddsfiles: the bare pipeline (bench/lib/bare/pipeline.ts), through a BullMQ queue of this concurrency if given. */
  readonly bare?: { queue?: number };
  sys?: OddsfilesSystem | BareSystem;
  readonly seconds: number[];
  /** CPU ms of all the variant's processes per round. */
  readonly cpu: number[];
  /** CPU ms a second of its processes while every variant is idle (timers, heartbeats). */
  idleCpuMsPerS?: number;
}

/** How long every variant sits idle, after the warm-up, while its processes' CPU is read. */
const IDLE_MS = 10_000;

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const templates = EXAMPLE_FEEDS.map((f) => docTemplate(f, KB * 1024));
  const variants = pickVariants();
  // Under --cpu-prof: the profiles are written when the processes stop, then summarised.
  const profileDir = PROFILE ? await tempDir('ingest-prof') : undefined;
  if (profileDir) {
    for (const v of variants)
      (v.options as { nodeArgs?: string[] }).nodeArgs = ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, String(variants.indexOf(v)))}`];
  }
  log('starting the variants…');
  for (const [i, v] of variants.entries())
    v.sys = v.bare ? await BareSystem.start(`ingest${i}-bare`, v.bare) : await OddsfilesSystem.start({ label: `ingest${i}`, ...v.options });
  const reference = await measureRounds(variants, templates);
  const timingRows = timingTable(variants);
  for (const v of variants) await v.sys!.stop();
  if (profileDir) {
    process.stdout.write(`\n${(await profileReport(variants, templates.length, profileDir)).join('\n')}\n`);
    return;
  }
  await publishReport('ingest', report(machine, templates, variants, reference, timingRows), WRITE_DOC);
}

/** The variants compared (`--variants` picks some), and each again on `--baseline`'s build. */
function pickVariants(): Variant[] {
  const variants: Variant[] = [
    { id: 'single', name: 'one process, all roles (`npm start`), concurrency 4, a validation thread', options: { shape: 'single' }, seconds: [], cpu: [] },
    { id: 'c1', name: 'watcher+worker, concurrency 1', options: { shape: 'ingest', config: { ingest: { concurrency: 1 } } }, seconds: [], cpu: [] },
    { id: 'default', name: 'watcher+worker, concurrency 4, a validation thread (default)', options: { shape: 'ingest' }, seconds: [], cpu: [] },
    {
      id: 'single-vt0',
      name: 'one process, all roles, validation on the event loop (`validate_threads: 0`)',
      options: { shape: 'single', config: { ingest: { validate_threads: 0 } } },
      seconds: [],
      cpu: [],
    },
    {
      id: 'vt0',
      name: 'watcher+worker, concurrency 4, validation on the event loop (`validate_threads: 0`)',
      options: { shape: 'ingest', config: { ingest: { validate_threads: 0 } } },
      seconds: [],
      cpu: [],
    },
    {
      id: 'vt2',
      name: 'watcher+worker, concurrency 4, two validation threads',
      options: { shape: 'ingest', config: { ingest: { validate_threads: 2 } } },
      seconds: [],
      cpu: [],
    },
    { id: 'c8', name: 'watcher+worker, concurrency 8', options: { shape: 'ingest', config: { ingest: { concurrency: 8 } } }, seconds: [], cpu: [] },
    { id: 'c16', name: 'watcher+worker, concurrency 16', options: { shape: 'ingest', config: { ingest: { concurrency: 16 } } }, seconds: [], cpu: [] },
    { id: 'two', name: 'watcher+worker + a 2nd worker process, concurrency 4 each', options: { shape: 'ingest', extraWorkers: 1 }, seconds: [], cpu: [] },
    {
      id: 'two-vt0',
      name: 'watcher+worker + a 2nd worker process, validation on their event loops',
      options: { shape: 'ingest', extraWorkers: 1, config: { ingest: { validate_threads: 0 } } },
      seconds: [],
      cpu: [],
    },
    {
      id: 'c8pool16',
      name: 'watcher+worker, concurrency 8, `UV_THREADPOOL_SIZE=16`',
      options: { shape: 'ingest', config: { ingest: { concurrency: 8 } }, env: { UV_THREADPOOL_SIZE: '16' } },
      seconds: [],
      cpu: [],
    },
    {
      id: 'single8',
      name: 'one process, all roles, concurrency 8, `UV_THREADPOOL_SIZE=16`',
      options: { shape: 'single', config: { ingest: { concurrency: 8 } }, env: { UV_THREADPOOL_SIZE: '16' } },
      seconds: [],
      cpu: [],
    },
    {
      id: 'pool32',
      name: 'watcher+worker, concurrency 16, `UV_THREADPOOL_SIZE=32`',
      options: { shape: 'ingest', config: { ingest: { concurrency: 16 } }, env: { UV_THREADPOOL_SIZE: '32' } },
      seconds: [],
      cpu: [],
    },
    {
      id: 'bare',
      name: 'floor: the bare pipeline (fs.watch → claim → read → JSON.parse → sha256 → durable store → Redis commit), no queue',
      options: { shape: 'ingest' },
      bare: {},
      seconds: [],
      cpu: [],
    },
    {
      id: 'bare-queue',
      name: 'floor: the same through a BullMQ queue, concurrency 4 (as the default)',
      options: { shape: 'ingest' },
      bare: { queue: 4 },
      seconds: [],
      cpu: [],
    },
    {
      id: 'bare-queue16',
      name: 'floor: the same through a BullMQ queue, concurrency 16',
      options: { shape: 'ingest' },
      bare: { queue: 16 },
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
    const bin = builtEntry(BASELINE);
    const picked = args['baseline-variants']?.split(',');
    const again = variants.filter((v) => !v.bare && (!picked || picked.includes(v.id!)));
    // The same shape and options on the other build, named by the variant's id only: what its name
    // says of defaults (a validation thread) is this build's, and may not hold there.
    variants.push(
      ...again.map((v) => ({
        id: `${v.id!}@baseline`,
        name: `baseline build, its own defaults, shaped as variant \`${v.id!}\``,
        options: { ...v.options, bin },
        seconds: [],
        cpu: [],
      })),
    );
  }
  return variants;
}

interface Reference {
  /** The reference loop's seconds and CPU ms per round. */
  readonly refSeconds: number[];
  readonly refCpu: number[];
  /** The same loop with the folder fsync a durable rename needs. */
  readonly durableSeconds: number[];
  readonly durableCpu: number[];
  readonly measuredS: number;
}

/** A warm-up round, then ROUNDS rounds of every variant and the reference loop in shuffled order. */
async function measureRounds(variants: Variant[], templates: readonly DocTemplate[]): Promise<Reference> {
  const redis = new Redis(TEST_REDIS_URL);
  const refDir = await tempDir('ingest-ref');
  const refSeconds: number[] = [];
  const refCpu: number[] = [];
  const durableSeconds: number[] = [];
  const durableCpu: number[] = [];
  const allPids = () => variants.flatMap((v) => v.sys!.pids());

  const runVariant = async (v: Variant): Promise<number> => {
    const r = await ingestRound(v.sys!, templates, redis, allPids);
    if (!r.settled) throw new Error(`${v.name}: not settled after 120 s`);
    v.cpu.push(r.cpuMs);
    return r.seconds;
  };
  const runReference = async (durable = false): Promise<number> => {
    const r = await referenceRound(join(refDir, 'r'), templates, allPids, durable);
    (durable ? durableCpu : refCpu).push(r.cpuMs);
    return r.seconds;
  };

  log('warm-up round…');
  await runReference();
  await runReference(true);
  for (const v of variants) await runVariant(v);
  refCpu.length = 0;
  durableCpu.length = 0;
  for (const v of variants) v.cpu.length = 0;
  for (const v of variants) if (v.sys instanceof OddsfilesSystem) v.sys.procs.forEach((p) => p.readLines('"jobId"'));
  await quiesce(allPids(), { maxMs: 30_000 });
  const idleCpu = (v: Variant) => v.sys!.pids().reduce((s, p) => s + liveThreadsCpuMs(p), 0);
  const idle0 = variants.map(idleCpu);
  await sleep(IDLE_MS);
  for (const [i, v] of variants.entries()) v.idleCpuMsPerS = ((idleCpu(v) - idle0[i]!) * 1000) / IDLE_MS;

  const started = Date.now();
  for (let r = 0; r < ROUNDS; r++) {
    const order: (Variant | 'ref' | 'durable')[] = shuffle(['ref', 'durable', ...variants]);
    const parts: string[] = [];
    for (const v of order) {
      if (v === 'ref') {
        const s = await runReference();
        refSeconds.push(s);
        parts.push(`ref ${fmtInt(templates.length / s)}/s`);
      } else if (v === 'durable') {
        const s = await runReference(true);
        durableSeconds.push(s);
        parts.push(`durable ref ${fmtInt(templates.length / s)}/s`);
      } else {
        const s = await runVariant(v);
        v.seconds.push(s);
        parts.push(`${v.id ?? v.name.slice(0, 28)} ${fmtInt(templates.length / s)}/s`);
      }
    }
    log(`round ${r + 1}: ${parts.join(' | ')}`);
  }
  const measuredS = Math.round((Date.now() - started) / 1000);
  redis.disconnect();

  return { refSeconds, refCpu, durableSeconds, durableCpu, measuredS };
}

/** Per-drop timings from the workers' log lines of the measured rounds. */
function timingTable(variants: readonly Variant[]): string[][] {
  const timingRows: string[][] = [];
  for (const v of variants) {
    if (!(v.sys instanceof OddsfilesSystem)) continue;
    const lines = v.sys.procs.flatMap((p) => p.readLines('"jobId"')).filter((l) => l.outcome === 'published');
    const t = (k: string) => median(lines.map((l) => (l.timings as Record<string, number>)[k] ?? Number.NaN));
    const rv = median(lines.map((l) => ((l.timings as Record<string, number>).read ?? Number.NaN) + ((l.timings as Record<string, number>).validate ?? 0)));
    timingRows.push([
      v.name,
      String(lines.length),
      fmtMs(rv),
      fmtMs(t('store')),
      fmtMs(t('commit')),
      fmtMs(t('total')),
      fmtMs(median(lines.map((l) => l.lagMs as number))),
    ]);
  }
  return timingRows;
}

/** The CPU profiles of every variant's processes, summarised by package and by function. */
async function profileReport(variants: readonly Variant[], drops: number, profileDir: string): Promise<string[]> {
  const lines: string[] = [];
  for (const [i, v] of variants.entries()) {
    const dir = join(profileDir, String(i));
    for (const f of await readdir(dir)) {
      const s = summarizeProfile(join(dir, f));
      const proc = v.sys instanceof OddsfilesSystem ? v.sys.procs.find((p) => f.includes(String(p.pid))) : undefined;
      lines.push(
        `### ${v.name}, process ${proc ? proc.roles.join('+') : f}: ${fmtInt(s.busyMs)} ms busy (${fmtMs(s.busyMs / (ROUNDS * drops + drops))} ms per drop, warm-up included)`,
      );
      lines.push('', ...profileTables(s));
    }
  }
  return lines;
}

function report(
  machine: ReturnType<typeof machineInfo>,
  templates: readonly DocTemplate[],
  variants: readonly Variant[],
  { refSeconds, refCpu, durableSeconds, durableCpu, measuredS }: Reference,
  timingRows: string[][],
): string {
  const totalBytes = templates.reduce((s, t) => s + t.bytes.length, 0);
  const refRate = templates.length / median(refSeconds);
  // CPU per drop over all rounds together: /proc counts CPU in 10 ms ticks, too coarse for the
  // ~100 ms of one round.
  const cpuPerDrop = (cpu: readonly number[]) => cpu.reduce((a, b) => a + b, 0) / cpu.length / templates.length;
  // Each round's own ratio (the reference ran in the same round, seconds apart): the machine's
  // speed moves between rounds, and this shows how far the verdict could move with it.
  const paired = (seconds: readonly number[]) => {
    const ratios = seconds.map((s, i) => refSeconds[i]! / s);
    return `${fmtX(median(ratios))} (${quantile(ratios, 0.25).toFixed(2)}–${quantile(ratios, 0.75).toFixed(2)})`;
  };
  const rows: string[][] = [
    [
      'reference loop (read + JSON.parse + write + fsync + rename)',
      fmtInt(refRate),
      `${fmtInt(templates.length / Math.max(...refSeconds))}–${fmtInt(templates.length / Math.min(...refSeconds))}`,
      (totalBytes / median(refSeconds) / 1e6).toFixed(0),
      '1.00×',
      '',
      fmtMs(cpuPerDrop(refCpu)),
      '',
      '',
    ],
    [
      'the same loop, durable: each feed in a folder of its own, fsynced after the rename (as the store writes a version)',
      fmtInt(templates.length / median(durableSeconds)),
      `${fmtInt(templates.length / Math.max(...durableSeconds))}–${fmtInt(templates.length / Math.min(...durableSeconds))}`,
      (totalBytes / median(durableSeconds) / 1e6).toFixed(0),
      fmtX(median(refSeconds) / median(durableSeconds)),
      paired(durableSeconds),
      fmtMs(cpuPerDrop(durableCpu)),
      '',
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
      paired(v.seconds),
      fmtMs(cpuPerDrop(v.cpu)),
      v.idleCpuMsPerS === undefined ? '' : v.idleCpuMsPerS.toFixed(1),
      v.bare ? 'floor' : rate / refRate >= 0.7 ? 'met' : '**missed**',
    ]);
  }
  return [
    machineLine(machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; rounds of ${templates.length} drops (every example filename, ${(totalBytes / templates.length / 1024).toFixed(0)} KB each, ${(totalBytes / 1e6).toFixed(1)} MB), ${ROUNDS} rounds after a warm-up, every variant and the reference once per round in shuffled order, each started only once the previous one's processes are idle; medians; ${measuredS} s of measurement.`,
    '',
    table(
      ['variant', 'drops/s (median)', 'range', 'MB/s', 'vs reference', 'per round: median (quartiles)', 'CPU ms per drop', 'idle CPU ms/s', 'target ≥ 0.7×'],
      rows,
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
    ),
    '',
    "vs reference: the variant's median rate over the reference's (the target's measure); per round: the ratio of the two within each round, its median and quartiles across rounds (how far the machine's changing speed moves it).",
    '',
    "CPU ms per drop: user + system time of all the variant's processes over all rounds (each until they are idle again: compression in the reader and manifest writes included) / the drops of all rounds (summed, not a median of rounds: /proc counts CPU in 10 ms ticks); for the reference, the loop's own process. Idle CPU ms/s: what the variant's processes use a second with nothing to do (timers, heartbeats, polls), read over ${IDLE_MS / 1000} s after the warm-up; the rounds' CPU includes it until the processes are idle again.",
    '',
    "Per drop, from the workers' log lines (median ms; read+validate: the worker's `read` + `validate` laps; `store` includes the `catalog.get` before it; lag: job's `receivedAt` → logged, so it includes waiting in the queue):",
    '',
    table(['variant', 'drops', 'read+validate', 'store', 'commit', 'total', 'lag'], timingRows),
  ].join('\n');
}

runMain(main);
