/**
 * Where a reader's CPU goes per request: one reader process as deployed (`oddsfiles start --roles
 * reader`, request log on, plan limit counted) under load, profiled with V8's `--cpu-prof`, and
 * the profile's self time summed by function and by package. It prints, and writes nothing else.
 *
 * `--request-log` and `--no-rate` profile a reader with `reader.request_log` set, or with a plan
 * without a rate (nothing to count). `--perf` profiles with Linux perf instead (the reader under
 * `--perf-basic-prof`, `perf record -g` during the load): the kernel's side included, and no
 * over-counting of system calls; it prints the CPU per request split by component (each sample
 * charged to the innermost frame of its stack that names one) and perf's self time by symbol.
 * `--bare` profiles, the same way, the bare node:http server (bench/lib/bare/node.ts) sending the
 * reader's bytes and response headers: side by side, the two show what the reader adds.
 *
 * Load: wrk when installed, else autocannon in this process. `--perf` needs perf (`linux-perf`).
 * The raw profile stays in the run's folder with BENCH_KEEP=1 (a V8 one opens in Chrome DevTools →
 * Performance or speedscope; a perf one in `perf report -i`).
 */
import { spawn, spawnSync } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort } from '../test/helpers/faults.js';
import { captureReplyHeaders, saveSite, startBareNode } from './lib/bare/node.js';
import { benchArgs } from './lib/common/cli.js';
import { loadTool, runLoad } from './lib/common/load.js';
import { machineInfo, machineLine, which } from './lib/common/machine.js';
import { OddsfilesProcess } from './lib/common/oddsfiles-process.js';
import { OddsfilesSystem, writeConfig } from './lib/common/oddsfiles-system.js';
import { Poller, waitHealthy } from './lib/common/poller.js';
import { cpuSplitMs } from './lib/common/proc.js';
import { summarizeProfile } from './lib/common/profile.js';
import { table } from './lib/common/report.js';
import { publishExampleSet } from './lib/common/rounds.js';
import { log, onCleanup, runMain } from './lib/common/run.js';
import { fmtInt } from './lib/common/stats.js';

const args = benchArgs("Where a reader's CPU goes per request: a V8 (or perf) profile of one reader under load.", {
  duration: { type: 'number', default: 8, quick: 2, description: 'seconds of profiled load' },
  connections: { type: 'number', default: 32, quick: 8, description: 'keep-alive connections of the load' },
  path: {
    type: 'string',
    default: 'gzip',
    choices: ['gzip', 'files', 'identity'],
    description: 'what is requested: the 200 KB file gzipped, /v1/files, or the file uncompressed',
  },
  top: { type: 'number', default: 30, description: 'rows of the function / symbol tables' },
  'request-log': { type: 'string', default: 'all', choices: ['all', 'errors', 'off'], description: 'reader.request_log of the profiled reader' },
  'no-rate': { type: 'boolean', description: 'the plan without a rate (no limit to count)' },
  perf: { type: 'boolean', description: 'profile with Linux perf instead of V8' },
  bare: { type: 'boolean', description: "profile the bare node:http server on the reader's bytes and headers instead of the reader" },
});
const DURATION = args.duration;
const CONNECTIONS = args.connections;
const TOP = args.top;
const PATH = args.path;
const REQUEST_LOG = args['request-log'];
const NO_RATE = args['no-rate'];
const PERF = args.perf;
const BARE = args.bare;
const BIG = 'site_pregame_northwind_soccer.json';

interface Measured {
  /** GET target, e.g. /v1/files, and what was profiled, for the report's first line. */
  readonly target: string;
  readonly setup: string;
  readonly who: string;
  readonly rps: number;
  readonly requests: number;
  /** CPU per request over the load (/proc), user and kernel, µs. */
  readonly userUs: number;
  readonly sysUs: number;
}

async function main(): Promise<void> {
  log(machineLine(machineInfo()));
  if (!which('wrk')) log('wrk is not installed (Debian: apt-get install -y wrk): the load comes from autocannon in this process.');
  const perf = PERF ? which('perf') : undefined;
  if (PERF && !perf) throw new Error('perf is not installed (Debian: apt-get install -y linux-perf)');

  const sys = await OddsfilesSystem.start({ label: 'profile', shape: 'pair' });
  const versions = await publishExampleSet(sys, BIG);
  log('published; starting the profiled reader');
  // Its own reader stops too: the profiled one is alone on the machine's CPUs.
  for (const p of sys.procs) await p.stop();

  const profDir = join(sys.dataDir, 'cpu-profile');
  const nodeArgs = perf ? ['--perf-basic-prof'] : ['--cpu-prof', '--cpu-prof-dir', profDir];
  const { reader, base } = await startProfiledReader(sys, nodeArgs, versions.find((v) => v.name === BIG)!.sha256);

  // The process profiled: the reader, or (`--bare`) the bare server on the reader's bytes and headers.
  let profiled: Profiled = { pid: reader.pid, base, stop: () => reader.stop() };
  if (BARE) {
    const dir = join(sys.dataDir, 'bare');
    await saveSite(dir, base, sys.key, BIG);
    const bare = await startBareNode(dir, sys.key, BIG, await captureReplyHeaders(base, sys.key, BIG), nodeArgs);
    await reader.stop();
    profiled = bare;
    log(`the bare node:http server holds the reader's bytes and headers; loading it (${loadTool})`);
  } else log(`the reader holds the file; loading it (${loadTool})`);
  const perfData = join(sys.dataDir, 'perf.data');
  const measured = await loadProfiled(profiled, sys.key, perf, perfData);
  if (perf) perfReport(perf, perfData, measured);
  else await v8Report(profDir, measured);
  await sys.stop();
}

type Profiled = { readonly pid: number; readonly base: string; stop(): Promise<void> };

/** A reader of its own, under the profiler's node flags, holding the big file compressed. */
async function startProfiledReader(sys: OddsfilesSystem, nodeArgs: string[], bigSha256: string): Promise<{ reader: OddsfilesProcess; base: string }> {
  const port = await freePort();
  const config = await writeConfig(sys.dataDir, { reader: { request_log: REQUEST_LOG }, ...(NO_RATE ? { plans: { pro: { allow: ['*'] } } } : {}) });
  const reader = new OddsfilesProcess(
    { ...sys.env, PORT: String(port), ODDSFILES_CONFIG: config },
    ['start', '--roles', 'reader'],
    join(sys.dataDir, 'reader.log'),
    ['reader'],
    nodeArgs,
  );
  onCleanup(() => reader.stop());
  const base = `http://127.0.0.1:${port}`;
  await waitHealthy(base, 'the profiled reader');
  const poller = new Poller(base, sys.key);
  await poller.untilHeld(`/v1/data/${BIG}`, `"${bigSha256.slice(0, 32)}-gz"`, { 'accept-encoding': 'gzip' }, 30_000);
  poller.close();

  return { reader, base };
}

/** A warm-up, then the measured load, sampled by perf when given; the profiled process stopped after. */
async function loadProfiled(profiled: Profiled, key: string, perf: string | undefined, perfData: string): Promise<Measured> {
  const target = PATH === 'files' ? '/v1/files' : `/v1/data/${BIG}`;
  const load = {
    url: `${profiled.base}${target}`,
    headers: { 'x-api-key': key, ...(PATH === 'gzip' ? { 'accept-encoding': 'gzip' } : {}) },
    connections: CONNECTIONS,
  };
  await runLoad({ ...load, seconds: args.quick ? 1 : 2 }); // so the profile is of compiled code, not of the JIT's first minutes
  // perf samples the process for the run's length; it starts a moment before the load and stops with it.
  const recorder = perf
    ? spawn(perf, ['record', '-F', '1999', '-g', '-p', String(profiled.pid), '-o', perfData, '--', 'sleep', String(DURATION)], { stdio: 'ignore' })
    : undefined;
  const recorded = recorder ? new Promise<void>((r) => recorder.once('exit', () => r())) : Promise.resolve();
  const cpu0 = cpuSplitMs(profiled.pid);
  const { rps, requests } = await runLoad({ ...load, seconds: DURATION });
  const cpu1 = cpuSplitMs(profiled.pid);
  await recorded;
  await profiled.stop();
  return {
    target,
    setup: BARE ? "bare node:http with the reader's bytes and headers" : `request_log: ${REQUEST_LOG}${NO_RATE ? ', plan without rate' : ''}`,
    who: BARE ? 'the bare server' : 'the reader',
    rps,
    requests,
    userUs: ((cpu1.user - cpu0.user) * 1000) / (requests || 1),
    sysUs: ((cpu1.system - cpu0.system) * 1000) / (requests || 1),
  };
}

/** Linux perf's view: by component, then the top symbols. */
function perfReport(perf: string, perfData: string, measured: Measured): void {
  const { target, setup, who, rps, userUs, sysUs } = measured;
  process.stdout.write(
    `\nGET ${target}${PATH === 'gzip' ? ' (gzip)' : ''} (${setup}): ${fmtInt(rps)} req/s over ${DURATION} s with ${CONNECTIONS} connections\n`,
  );
  process.stdout.write(
    `CPU of ${who} over the load (/proc): ${(userUs + sysUs).toFixed(1)} µs per request, of which ${userUs.toFixed(1)} in user space and ${sysUs.toFixed(1)} in the kernel.\n\n`,
  );
  const report = spawnSync(perf, ['report', '-i', perfData, '--stdio', '--no-children', '--sort', 'symbol', '-g', 'none', '--percent-limit', '0.4'], {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  const lines = report.stdout
    .split('\n')
    .filter((l) => /^\s+[\d.]+%/.test(l))
    .slice(0, TOP);
  const total = userUs + sysUs;
  const rows = lines.map((l) => {
    const m = /^\s+([\d.]+)%\s+\[([.k])\]\s+(.*)$/.exec(l);
    if (!m) return [l.trim(), '', ''];
    return [`${m[2] === 'k' ? '[kernel] ' : ''}${m[3]!.trim().slice(0, 110)}`, `${m[1]} %`, ((Number(m[1]) / 100) * total).toFixed(2)];
  });
  process.stdout.write(
    table(
      ['component (perf, innermost frame that names one)', 'share', 'µs / request'],
      perfComponents(perf, perfData).map(([k, share]) => [k, `${(share * 100).toFixed(1)} %`, (share * total).toFixed(2)]),
    ),
  );
  process.stdout.write('\n\n');
  process.stdout.write(table(['symbol (perf, self)', 'self', 'µs / request'], rows));
  process.stdout.write('\n');
}

/** The V8 CPU profile's view: by package, then by function. */
async function v8Report(profDir: string, measured: Measured): Promise<void> {
  const { target, setup, who, rps, requests, userUs, sysUs } = measured;
  const file = (await readdir(profDir)).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no profile written in ${profDir}`);
  const { busyMs, groups, functions } = summarizeProfile(join(profDir, file), TOP);
  // Busy time over the whole profile (start and warm-up included) spread over the measured requests: an upper estimate.
  const perRequest = (ms: number) => ((ms * 1000) / (requests || 1)).toFixed(1);
  const rows = (list: [string, number][]) => list.map(([k, ms]) => [k, `${((ms / busyMs) * 100).toFixed(1)} %`, perRequest(ms)]);
  process.stdout.write(
    `\nGET ${target}${PATH === 'gzip' ? ' (gzip)' : ''} (${setup}): ${fmtInt(rps)} req/s over ${DURATION} s with ${CONNECTIONS} connections; ${(busyMs / 1000).toFixed(2)} s of CPU in the profile, ~${perRequest(busyMs)} µs per request\n\n`,
  );
  // The kernel's share from /proc, measured over the load alone: the V8 profile cannot tell it
  // apart (a sample taken in a system call is charged to the native function that made it, and
  // samples are delivered late, at the call's return, so that function is over-counted).
  process.stdout.write(
    `CPU of ${who} over the load (/proc): ${(userUs + sysUs).toFixed(1)} µs per request, of which ${userUs.toFixed(1)} in user space and ${sysUs.toFixed(1)} in the kernel. The profile below over-counts the native function of a system call (writev above all); for the kernel side use Linux perf: \`perf record -g -p PID\` with the reader started under \`--perf-basic-prof\`.\n\n`,
  );
  process.stdout.write(table(['package / module', 'self', 'µs / request'], rows(groups.slice(0, 20))));
  process.stdout.write('\n\n');
  process.stdout.write(table(['function', 'self', 'µs / request'], rows(functions)));
  process.stdout.write('\n');
}

/**
 * Each perf sample charged to one part of the reader: the innermost frame of its stack that names
 * one (a sample in a V8 builtin called from pino is the log's; the HTTP parser's frames sit under
 * everything, so they count only what nothing inside them claims).
 */
const COMPONENTS: readonly (readonly [string, RegExp])[] = [
  ['request log (pino, sonic-boom)', /pino|sonic-boom|quick-format|fast-redact|request-log\.js/],
  ['metrics (prom-client, the response hook)', /prom-client|ops-plugin|ops\/metrics\.js/],
  ['API key (hash, lookup)', /keys\/ring\.js|keys\/secret\.js/],
  ['plan limit (tokens, headers)', /rate-limit\.js|limits\.js|lease\.js/],
  ['reader routes, auth, answers', /dist\/src\/reader/],
  ['load shedding (under-pressure)', /under-pressure/],
  ['V8 garbage collection', /Scavenge|v8::internal::Heap|MarkCompact|Sweeper|GCTracer|ConcurrentMarking/],
  ['kernel: waking the client (loopback)', /sock_def_readable/],
  ['kernel: socket write', /writev|tcp_sendmsg/],
  ['kernel: socket read', /tcp_recvmsg|sock_read_iter|ksys_read/],
  ['kernel: epoll', /epoll/],
  ['Node HTTP response (headers, streams)', /_http_outgoing|_http_server|node:net|stream_base_commons|streams\/writable/],
  ['Node HTTP parser', /llhttp|_http_common|Parser::/],
  ['Fastify', /node_modules\/fastify|find-my-way|avvio|fast-json-stringify|@fastify/],
];

function perfComponents(perf: string, data: string): [string, number][] {
  const out = spawnSync(perf, ['script', '-i', data, '-F', 'ip,sym'], { encoding: 'utf8', maxBuffer: 1 << 30 }).stdout;
  const counts = new Map<string, number>();
  let samples = 0;
  for (const block of out.split('\n\n')) {
    const frames = block
      .split('\n')
      .map((l) => l.trim().replace(/^[0-9a-f]+\s+/, ''))
      .filter(Boolean);
    if (frames.length === 0) continue;
    samples++;
    let name: string | undefined;
    for (const f of frames) {
      name = COMPONENTS.find(([, re]) => re.test(f))?.[0];
      if (name) break;
    }
    name ??= frames.some((f) => f.startsWith('entry_SYSCALL') || f.startsWith('do_syscall')) ? 'kernel: other' : 'other';
    counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  return [...counts].map(([k, n]): [string, number] => [k, n / (samples || 1)]).sort((a, b) => b[1] - a[1]);
}

runMain(main);
