/**
 * Where a reader's CPU goes per request: one reader process as deployed (`oddsfiles start --roles
 * reader`, request log on, plan limit counted) under wrk, profiled with V8's `--cpu-prof`, and the
 * profile's self time summed by function and by package. The tool for item 1 of "What to change
 * next" in docs/BENCHMARKS.md; it prints and writes nothing else.
 *
 *   npx tsx bench/reader-profile.ts [--duration 8] [--connections 32] [--path files|gzip|identity] [--top 30] [--request-log all|errors|off] [--no-rate] [--perf] [--bare]
 *
 * `--request-log` and `--no-rate` profile a reader with `reader.request_log` set, or with a plan
 * without a rate (nothing to count). `--perf` profiles with Linux perf instead of V8 (the reader
 * under `--perf-basic-prof`, `perf record -g` while wrk runs): the kernel's side included, and no
 * over-counting of system calls; it prints the CPU per request split by component (each sample
 * charged to the innermost frame of its stack that names one: the request log, metrics, the key,
 * the plan limit, Node's HTTP code, the kernel's...) and perf's self time by symbol. `--bare`
 * profiles, the same way, the bare node:http server of bench/reader-nginx.ts sending the reader's
 * bytes and response headers (bench/bare-node.ts) instead of the reader: side by side, the two
 * tables show what the reader adds to each part, Node's own included.
 *
 * Needs wrk (Debian: `apt-get install -y wrk`), and for `--perf` perf (`linux-perf`). The raw
 * profile stays in the run's folder with BENCH_KEEP=1 (a V8 one opens in Chrome DevTools →
 * Performance or speedscope; a perf one in `perf report -i`).
 */
import { spawn, spawnSync } from 'node:child_process';
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
  writeConfig,
} from './common.js';
import { captureReplyHeaders, saveSite, startBareNode } from './bare-node.js';

const args = process.argv.slice(2);
const DURATION = numberArg('duration', 8, args);
const CONNECTIONS = numberArg('connections', 32, args);
const TOP = numberArg('top', 30, args);
const PATHS = ['gzip', 'files', 'identity'] as const;
const PATH = args.includes('--path') ? args[args.indexOf('--path') + 1] : 'gzip';
if (!PATHS.includes(PATH as (typeof PATHS)[number])) throw new Error(`--path takes ${PATHS.join(', ')}, not "${PATH}"`);
const REQUEST_LOG = args.includes('--request-log') ? args[args.indexOf('--request-log') + 1] : 'all';
if (!['all', 'errors', 'off'].includes(REQUEST_LOG!)) throw new Error(`--request-log takes all, errors or off, not "${REQUEST_LOG}"`);
const NO_RATE = args.includes('--no-rate');
const PERF = args.includes('--perf');
const BARE = args.includes('--bare');
const BIG = 'site_pregame_northwind_soccer.json';

async function main(): Promise<void> {
  log(machineLine(machineInfo()));
  const wrk = which('wrk');
  if (!wrk) throw new Error('wrk is not installed (Debian: apt-get install -y wrk)');
  const perf = PERF ? which('perf') : undefined;
  if (PERF && !perf) throw new Error('perf is not installed (Debian: apt-get install -y linux-perf)');

  const sys = await OddsfilesSystem.start({ label: 'profile', shape: 'pair' });
  const versions = await publishExampleSet(sys, BIG);
  log('published; starting the profiled reader');
  // Its own reader stops too: the profiled one is alone on the machine's CPUs.
  for (const p of sys.procs) await p.stop();

  const port = await freePort();
  const profDir = join(sys.dataDir, 'cpu-profile');
  const config = await writeConfig(sys.dataDir, { reader: { request_log: REQUEST_LOG }, ...(NO_RATE ? { plans: { pro: { allow: ['*'] } } } : {}) });
  const nodeArgs = perf ? ['--perf-basic-prof'] : ['--cpu-prof', '--cpu-prof-dir', profDir];
  const reader = new OddsfilesProcess({ ...sys.env, PORT: String(port), ODDSFILES_CONFIG: config }, ['start', '--roles', 'reader'], join(sys.dataDir, 'reader.log'), ['reader'], nodeArgs);
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

  // The process profiled: the reader, or (`--bare`) the bare server on the reader's bytes and headers.
  let profiled: { readonly pid: number; readonly base: string; stop(): Promise<void> } = { pid: reader.pid, base, stop: () => reader.stop() };
  if (BARE) {
    const dir = join(sys.dataDir, 'bare');
    await saveSite(dir, base, sys.key, BIG);
    const bare = await startBareNode(dir, sys.key, BIG, await captureReplyHeaders(base, sys.key, BIG), nodeArgs);
    await reader.stop();
    profiled = bare;
    log("the bare node:http server holds the reader's bytes and headers; loading it with wrk");
  } else log('the reader holds the file; loading it with wrk');
  const target = PATH === 'files' ? '/v1/files' : `/v1/data/${BIG}`;
  const headers = ['-H', `x-api-key: ${sys.key}`, ...(PATH === 'gzip' ? ['-H', 'accept-encoding: gzip'] : [])];
  spawnSync(wrk, ['-t1', `-c${CONNECTIONS}`, '-d2s', ...headers, `${profiled.base}${target}`]); // warm-up (JIT)
  const perfData = join(sys.dataDir, 'perf.data');
  // perf samples the reader for the run's length; it starts a moment before wrk and stops with it.
  const recorder = perf ? spawn(perf, ['record', '-F', '1999', '-g', '-p', String(profiled.pid), '-o', perfData, '--', 'sleep', String(DURATION)], { stdio: 'ignore' }) : undefined;
  const recorded = recorder ? new Promise<void>((r) => recorder.once('exit', () => r())) : Promise.resolve();
  const cpu0 = cpuSplitMs(profiled.pid);
  const wrkRun = spawn(wrk, ['-t1', `-c${CONNECTIONS}`, `-d${DURATION}s`, ...headers, `${profiled.base}${target}`]);
  let out = '';
  wrkRun.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
  await new Promise<void>((r) => wrkRun.once('exit', () => r()));
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  const requests = Number(/(\d+) requests in/.exec(out)?.[1]);
  const cpu1 = cpuSplitMs(profiled.pid);
  await recorded;
  await profiled.stop();

  const userUs = ((cpu1.user - cpu0.user) * 1000) / (requests || 1);
  const sysUs = ((cpu1.system - cpu0.system) * 1000) / (requests || 1);
  const setup = BARE ? "bare node:http with the reader's bytes and headers" : `request_log: ${REQUEST_LOG}${NO_RATE ? ', plan without rate' : ''}`;
  const who = BARE ? 'the bare server' : 'the reader';
  if (perf) {
    process.stdout.write(`\nGET ${target}${PATH === 'gzip' ? ' (gzip)' : ''} (${setup}): ${fmtInt(rps)} req/s over ${DURATION} s with ${CONNECTIONS} connections\n`);
    process.stdout.write(`CPU of ${who} over the wrk run (/proc): ${(userUs + sysUs).toFixed(1)} µs per request, of which ${userUs.toFixed(1)} in user space and ${sysUs.toFixed(1)} in the kernel.\n\n`);
    const report = spawnSync(perf, ['report', '-i', perfData, '--stdio', '--no-children', '--sort', 'symbol', '-g', 'none', '--percent-limit', '0.4'], { encoding: 'utf8', maxBuffer: 64 << 20 });
    const lines = report.stdout.split('\n').filter((l) => /^\s+[\d.]+%/.test(l)).slice(0, TOP);
    const total = userUs + sysUs;
    const rows = lines.map((l) => {
      const m = /^\s+([\d.]+)%\s+\[([.k])\]\s+(.*)$/.exec(l);
      if (!m) return [l.trim(), '', ''];
      return [`${m[2] === 'k' ? '[kernel] ' : ''}${m[3]!.trim().slice(0, 110)}`, `${m[1]} %`, ((Number(m[1]) / 100) * total).toFixed(2)];
    });
    process.stdout.write(table(['component (perf, innermost frame that names one)', 'share', 'µs / request'], perfComponents(perf, perfData).map(([k, share]) => [k, `${(share * 100).toFixed(1)} %`, (share * total).toFixed(2)])));
    process.stdout.write('\n\n');
    process.stdout.write(table(['symbol (perf, self)', 'self', 'µs / request'], rows));
    process.stdout.write('\n');
    await sys.stop();
    return;
  }
  const file = (await readdir(profDir)).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no profile written in ${profDir}`);
  const { busyMs, groups, functions } = summarizeProfile(join(profDir, file), TOP);
  // Busy time over the whole profile (start and warm-up included) spread over the measured requests: an upper estimate.
  const perRequest = (ms: number) => ((ms * 1000) / (requests || 1)).toFixed(1);
  const rows = (list: [string, number][]) => list.map(([k, ms]) => [k, `${((ms / busyMs) * 100).toFixed(1)} %`, perRequest(ms)]);
  process.stdout.write(`\nGET ${target}${PATH === 'gzip' ? ' (gzip)' : ''} (${setup}): ${fmtInt(rps)} req/s over ${DURATION} s with ${CONNECTIONS} connections; ${(busyMs / 1000).toFixed(2)} s of CPU in the profile, ~${perRequest(busyMs)} µs per request\n\n`);
  // The kernel's share from /proc, measured over the wrk run alone: the V8 profile cannot tell it
  // apart (a sample taken in a system call is charged to the native function that made it, and
  // samples are delivered late, at the call's return, so that function is over-counted).
  process.stdout.write(
    `CPU of ${who} over the wrk run (/proc): ${(userUs + sysUs).toFixed(1)} µs per request, of which ${userUs.toFixed(1)} in user space and ${sysUs.toFixed(1)} in the kernel. The profile below over-counts the native function of a system call (writev above all); for the kernel side use Linux perf: \`perf record -g -p PID\` with the reader started under \`--perf-basic-prof\` (docs/BENCHMARKS.md, reader section).\n\n`,
  );
  process.stdout.write(table(['package / module', 'self', 'µs / request'], rows(groups.slice(0, 20))));
  process.stdout.write('\n\n');
  process.stdout.write(table(['function', 'self', 'µs / request'], rows(functions)));
  process.stdout.write('\n');
  await sys.stop();
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
