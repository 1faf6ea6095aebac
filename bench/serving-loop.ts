/**
 * The serving loop of `npm start` while it ingests: one process with every role, taking rounds of
 * drops renamed into its inbox at once, with its drops checked on a validation thread (the
 * default there) and on its event loop (`ingest.validate_threads: 0`), side by side in
 * alternating rounds. Measured: the event-loop delay of the process during each round (the wait
 * a consumer's request would have had; perf_hooks.monitorEventLoopDelay at 1 ms, loaded with
 * --import bench/lib/stall/loop-probe.mjs), and the round's drops settled per second.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { EXAMPLE_FEEDS } from '../test/fixtures/corpus.js';
import { TEST_REDIS_URL } from '../test/helpers/redis.js';
import { benchArgs, commandLine } from './lib/common/cli.js';
import { docTemplate } from './lib/common/drops.js';
import { machineInfo, machineLine } from './lib/common/machine.js';
import { OddsfilesSystem } from './lib/common/oddsfiles-system.js';
import { publishReport, table } from './lib/common/report.js';
import { ingestRound } from './lib/common/rounds.js';
import { log, runMain, tempDir } from './lib/common/run.js';
import { fmtMs, median } from './lib/common/stats.js';

const args = benchArgs("`npm start`'s event-loop delay while it ingests, with its drops checked on a thread and on its loop.", {
  rounds: { type: 'number', default: 12, quick: 2, description: 'measured rounds per size (after one warm-up round)' },
  sizes: { type: 'string', default: '200,5000', quick: '20', description: 'comma-separated drop sizes, KiB: 38 drops a round up to 1 MiB, 8 above' },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});
const PROBE = fileURLToPath(new URL('./lib/stall/loop-probe.mjs', import.meta.url));

interface Probe {
  readonly p99: number;
  readonly max: number;
}

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const redis = new Redis(TEST_REDIS_URL);
  const probeDir = await tempDir('serving-loop');
  const shapes = [1, 0].map((threads) => ({ threads, dir: join(probeDir, String(threads)), sys: undefined as OddsfilesSystem | undefined }));
  for (const s of shapes) {
    await mkdir(s.dir);
    s.sys = await OddsfilesSystem.start({
      label: `loop${s.threads}`,
      shape: 'single',
      config: { ingest: { validate_threads: s.threads } },
      env: { LOOP_PROBE_DIR: s.dir },
      nodeArgs: ['--import', PROBE],
    });
  }
  /** The loop's delay since the last call (the probe writes it on SIGUSR2, then starts again). */
  const probe = async (s: (typeof shapes)[number]): Promise<Probe> => {
    const pid = s.sys!.pids()[0]!;
    const file = join(s.dir, `loop-${pid}.json`);
    const before = await readFile(file, 'utf8').catch(() => '');
    process.kill(pid, 'SIGUSR2');
    for (let i = 0; i < 100; i++) {
      const now = await readFile(file, 'utf8').catch(() => '');
      if (now !== '' && now !== before) {
        try {
          return JSON.parse(now) as Probe;
        } catch {
          // read while being written: again
        }
      }
      await sleep(20);
    }
    throw new Error(`no probe answer from ${pid}`);
  };
  const rows: string[][] = [];
  for (const kb of args.sizes.split(',').map(Number)) {
    const templates = EXAMPLE_FEEDS.slice(0, kb > 1024 ? 8 : 38).map((f) => docTemplate(f, kb * 1024));
    const seen = new Map<number, { p99: number[]; max: number[]; rate: number[] }>(shapes.map((s) => [s.threads, { p99: [], max: [], rate: [] }]));
    for (let r = 0; r <= args.rounds; r++) {
      for (const s of r % 2 === 0 ? shapes : [...shapes].reverse()) {
        await probe(s);
        const round = await ingestRound(s.sys!, templates, redis, () => shapes.flatMap((x) => x.sys!.pids()));
        const p = await probe(s);
        if (r === 0) continue; // warm-up
        const m = seen.get(s.threads)!;
        m.p99.push(p.p99);
        m.max.push(p.max);
        m.rate.push(templates.length / round.seconds);
      }
      log(`${kb} KiB, round ${r}${r === 0 ? ' (warm-up)' : ''} done`);
    }
    for (const s of shapes) {
      const m = seen.get(s.threads)!;
      rows.push([
        `${templates.length} × ${kb} KiB`,
        s.threads === 1 ? 'a validation thread (default)' : 'on the event loop (`validate_threads: 0`)',
        fmtMs(median(m.p99)),
        fmtMs(median(m.max)),
        fmtMs(Math.max(...m.max)),
        String(Math.round(median(m.rate))),
      ]);
    }
  }
  for (const s of shapes) await s.sys!.stop();
  redis.disconnect();
  const report = [
    machineLine(machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; ${args.rounds} rounds per size after a warm-up, the two processes in alternating order; medians of rounds.`,
    '',
    table(['drops per round', 'drops checked', 'loop delay p99, ms', 'longest delay, ms', 'longest of all rounds, ms', 'drops/s'], rows, [
      'l',
      'l',
      'r',
      'r',
      'r',
      'r',
    ]),
    '',
    'Loop delay: how late a timer of the one process (`npm start`: the reader shares it) fired during a round, from rename to settled.',
  ].join('\n');
  await publishReport('serving-loop', report, !args['no-doc'] && !args.quick);
}

runMain(main);
