/**
 * Where a reader's CPU goes per request: one reader process as deployed (`oddsfiles start --roles
 * reader`, request log on, plan limit counted) under wrk, profiled with V8's `--cpu-prof`, and the
 * profile's self time summed by function and by package. The tool for item 1 of "What to change
 * next" in docs/BENCHMARKS.md; it prints and writes nothing else.
 *
 *   npx tsx bench/reader-profile.ts [--duration 8] [--connections 32] [--path files|gzip|identity] [--top 30]
 *
 * Needs wrk (Debian: `apt-get install -y wrk`). The raw profile stays in the run's folder with
 * BENCH_KEEP=1 (open it in Chrome DevTools → Performance, or speedscope).
 */
import { spawnSync } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import {
  cpuSplitMs,
  fmtInt,
  freePort,
  log,
  machineInfo,
  machineLine,
  numberArg,
  OddsfilesProcess,
  OddsfilesSystem,
  onCleanup,
  publishExampleSet,
  Poller,
  runMain,
  sleep,
  summarizeProfile,
  table,
  which,
} from './common.js';

const args = process.argv.slice(2);
const DURATION = numberArg('duration', 8, args);
const CONNECTIONS = numberArg('connections', 32, args);
const TOP = numberArg('top', 30, args);
const PATHS = ['gzip', 'files', 'identity'] as const;
const PATH = args.includes('--path') ? args[args.indexOf('--path') + 1] : 'gzip';
if (!PATHS.includes(PATH as (typeof PATHS)[number])) throw new Error(`--path takes ${PATHS.join(', ')}, not "${PATH}"`);
const BIG = 'site_pregame_northwind_soccer.json';

async function main(): Promise<void> {
  log(machineLine(machineInfo()));
  const wrk = which('wrk');
  if (!wrk) throw new Error('wrk is not installed (Debian: apt-get install -y wrk)');

  const sys = await OddsfilesSystem.start({ label: 'profile', shape: 'pair' });
  const versions = await publishExampleSet(sys, BIG);
  log('published; starting the profiled reader');
  // Its own reader stops too: the profiled one is alone on the machine's CPUs.
  for (const p of sys.procs) await p.stop();

  const port = await freePort();
  const profDir = join(sys.dataDir, 'cpu-profile');
  const reader = new OddsfilesProcess({ ...sys.env, PORT: String(port) }, ['start', '--roles', 'reader'], join(sys.dataDir, 'reader.log'), ['reader'], ['--cpu-prof', '--cpu-prof-dir', profDir]);
  onCleanup(() => reader.stop());
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; !(await fetch(`${base}/healthz`).then((r) => r.ok, () => false)); i++) {
    if (i > 300) throw new Error('the reader did not start');
    await sleep(50);
  }
  const big = versions.find((v) => v.name === BIG)!;
  const poller = new Poller(base, sys.key);
  for (let i = 0; (await poller.get(`/v1/data/${BIG}`, { 'accept-encoding': 'gzip', 'if-none-match': `"${big.sha256.slice(0, 32)}-gz"` })).status !== 304; i++) {
    if (i > 500) throw new Error('the profiled reader does not serve the file (see reader.log with BENCH_KEEP=1)');
    await sleep(20);
  }
  poller.close();

  log('the reader holds the file; loading it with wrk');
  const target = PATH === 'files' ? '/v1/files' : `/v1/data/${BIG}`;
  const headers = ['-H', `x-api-key: ${sys.key}`, ...(PATH === 'gzip' ? ['-H', 'accept-encoding: gzip'] : [])];
  spawnSync(wrk, ['-t1', `-c${CONNECTIONS}`, '-d2s', ...headers, `${base}${target}`]); // warm-up (JIT)
  const cpu0 = cpuSplitMs(reader.pid);
  const run = spawnSync(wrk, ['-t1', `-c${CONNECTIONS}`, `-d${DURATION}s`, ...headers, `${base}${target}`], { encoding: 'utf8' });
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(run.stdout)?.[1]);
  const requests = Number(/(\d+) requests in/.exec(run.stdout)?.[1]);
  const cpu1 = cpuSplitMs(reader.pid);
  await reader.stop();

  const file = (await readdir(profDir)).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no profile written in ${profDir}`);
  const { busyMs, groups, functions } = summarizeProfile(join(profDir, file), TOP);
  // Busy time over the whole profile (start and warm-up included) spread over the measured requests: an upper estimate.
  const perRequest = (ms: number) => ((ms * 1000) / (requests || 1)).toFixed(1);
  const rows = (list: [string, number][]) => list.map(([k, ms]) => [k, `${((ms / busyMs) * 100).toFixed(1)} %`, perRequest(ms)]);
  process.stdout.write(`\nGET ${target}${PATH === 'gzip' ? ' (gzip)' : ''}: ${fmtInt(rps)} req/s over ${DURATION} s with ${CONNECTIONS} connections; ${(busyMs / 1000).toFixed(2)} s of CPU in the profile, ~${perRequest(busyMs)} µs per request\n\n`);
  // The kernel's share from /proc, measured over the wrk run alone: the V8 profile cannot tell it
  // apart (a sample taken in a system call is charged to the native function that made it, and
  // samples are delivered late, at the call's return, so that function is over-counted).
  const userUs = ((cpu1.user - cpu0.user) * 1000) / (requests || 1);
  const sysUs = ((cpu1.system - cpu0.system) * 1000) / (requests || 1);
  process.stdout.write(
    `CPU of the reader over the wrk run (/proc): ${(userUs + sysUs).toFixed(1)} µs per request, of which ${userUs.toFixed(1)} in user space and ${sysUs.toFixed(1)} in the kernel. The profile below over-counts the native function of a system call (writev above all); for the kernel side use Linux perf: \`perf record -g -p PID\` with the reader started under \`--perf-basic-prof\` (docs/BENCHMARKS.md, reader section).\n\n`,
  );
  process.stdout.write(table(['package / module', 'self', 'µs / request'], rows(groups.slice(0, 20))));
  process.stdout.write('\n');
  process.stdout.write(table(['function', 'self', 'µs / request'], rows(functions)));
  await sys.stop();
}

runMain(main);
