/**
 * The change feed: how soon a published change reaches its consumers, and what holding many of
 * them costs the reader. One oddsfiles deployment with a process per role (watcher, worker,
 * reader), the measured drops renamed into its inbox by this process.
 *
 * 1. Event latency: rename → the SSE `change` event at a stream client of this process, alone and
 *    with background streams (in child processes) and background drops of the other feeds;
 *    interleaved with drops measured as the freshness bench does (rename → first GET serving it).
 * 2. Long-poll: waiting GET /v1/changes answered, timed from the event reaching the reference
 *    stream client of this process (same clock), so the ingest path is not counted.
 * 3. Fan-out: many streams on the one reader (clients split over child processes, every
 *    `--sample`-th timing its events), changes of one file at `--fan-rate`/s: latency, the
 *    reader's RSS, and /v1/data throughput of another file with and without the streams open;
 *    then the same streams on a bare node:http server of events (lib/bare/fanout.ts), the floor of
 *    a Node server on this machine, for the CPU per event written and the RSS per stream.
 */
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EXAMPLE_FEEDS } from '../test/fixtures/corpus.js';
import { runCli } from '../test/helpers/service.js';
import { benchArgs, commandLine, envOf } from './lib/common/cli.js';
import { Dropper } from './lib/common/dropper.js';
import { docTemplate, version } from './lib/common/drops.js';
import { loadTool } from './lib/common/load.js';
import { machineInfo, machineLine } from './lib/common/machine.js';
import { builtEntry, OddsfilesSystem } from './lib/common/oddsfiles-system.js';
import { Poller } from './lib/common/poller.js';
import { cpuMsOf, memOf, quiesce } from './lib/common/proc.js';
import { publishReport, table } from './lib/common/report.js';
import { dropAndPoll, waitDrained } from './lib/common/rounds.js';
import { log, runMain, tempDir } from './lib/common/run.js';
import { fanOutPart } from './lib/changes/fanout.js';
import type { Bench, SseEvent } from './lib/changes/bench.js';
import { profileReport } from './lib/common/profile.js';
import { fanOutReport, type FanOutResult } from './lib/changes/fanout-report.js';
import { ClientsChild, SseSocket } from './lib/changes/sse-clients.js';
import { fmtMs, median, nowMs, quantile } from './lib/common/stats.js';

const args = benchArgs('Change feed: rename → SSE event latency, long-poll answers, and fan-out of one reader to many streams.', {
  drops: { type: 'number', default: 40, quick: 4, description: 'measured drops per condition (and as many polled ones for comparison)' },
  rate: { type: 'number', default: 100, quick: 20, description: 'background drops per second of the other feeds in the loaded condition' },
  kb: { type: 'number', default: 200, quick: 20, description: 'size of every drop, KiB' },
  'bg-streams': { type: 'number', default: 1000, quick: 50, description: 'open streams in the loaded condition' },
  'bg-scope': {
    type: 'string',
    default: 'all',
    choices: ['all', 'measured'],
    description: "the files the background streams' key may read: every feed (each stream gets every background change) or only the measured one",
  },
  waiters: { type: 'number', default: 1000, quick: 20, description: 'waiting long-polls per round' },
  'lp-rounds': { type: 'number', default: 10, quick: 2, description: 'long-poll rounds (one change each)' },
  streams: { type: 'number', default: 10_000, quick: 50, description: 'open streams on the reader in the fan-out part' },
  procs: { type: 'number', default: 4, quick: 1, description: 'child processes holding the stream clients' },
  env: { type: 'strings', description: 'NAME=VALUE in the environment of the oddsfiles processes (e.g. MALLOC_ARENA_MAX=2, as the image sets)' },
  sample: { type: 'number', default: 10, quick: 5, description: 'every N-th fan-out stream times its events' },
  'fan-rate': { type: 'number', default: 10, description: 'changes per second in the fan-out part' },
  'fan-seconds': { type: 'number', default: 20, quick: 3, description: 'seconds of changes measured in the fan-out part' },
  floors: {
    type: 'strings',
    description: 'more references after the bare node:http one: net (a node:net server, no HTTP objects), joined (node:http, 10 events per write); repeatable',
  },
  'fan-conflate': { type: 'number', default: 1000, description: 'then the same streams with ?conflate=MS, for the reader CPU against unconflated (0: skip)' },
  'load-seconds': { type: 'number', default: 5, quick: 2, description: 'seconds of /v1/data load, with and without the streams' },
  'load-connections': { type: 'number', default: 16, quick: 4, description: 'connections of the /v1/data load' },
  bin: {
    type: 'string',
    description: "another build's checkout to run instead of this one's (its dist/bin/oddsfiles.js), e.g. the commit before a change, built",
  },
  processes: {
    type: 'number',
    default: 1,
    description: 'reader processes sharing the port (`start --roles reader --processes N`); CPU and RSS are their sums',
  },
  'cpu-prof': { type: 'boolean', description: 'profile the reader process(es) (node --cpu-prof) and print where their time went, by file and function' },
  part: { type: 'strings', description: 'run only this part: latency, long-poll or fan-out (repeatable; default all three)' },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});
const PARTS = ['latency', 'long-poll', 'fan-out'] as const;
for (const p of args.part) if (!(PARTS as readonly string[]).includes(p)) throw new Error(`--part takes ${PARTS.join(' | ')}, not "${p}"`);
const runs = (p: (typeof PARTS)[number]) => args.part.length === 0 || args.part.includes(p);
const MEASURED = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_northwind_soccer.json')!;
const OTHERS = EXAMPLE_FEEDS.filter((f) => f !== MEASURED);
const LOADED = OTHERS[0]!;
const PLAN = { rate: { max: 1_000_000_000, per: '1m' }, streams: 100_000 };
const mustHave = async <T>(p: Promise<T | undefined>): Promise<T> => (await p) ?? Promise.reject(new Error('a measured drop had no event within 10 s'));
const verdict = (ok: boolean) => (ok ? 'met' : '**missed**');
const pct = (v: number[]) => `${fmtMs(median(v))} / ${fmtMs(quantile(v, 0.99))}`;

type Latencies = Record<string, { sse: number[]; get: number[]; bg: number[]; note: string }>;
interface LongPolls {
  readonly lp: number[];
  readonly lpRename: number[];
  readonly lpAnswered: number;
  readonly lpCpuMs: number;
}

/** One deployment with a process per role, a key, the reference stream client, the poller and the client processes. */
async function setUp(profileDir: string | undefined): Promise<Bench> {
  const machine = machineInfo();
  log(machineLine(machine));
  const template = docTemplate(MEASURED, args.kb * 1024);
  const sys = await OddsfilesSystem.start({
    label: 'changes',
    shape: 'split',
    config: { plans: { pro: { allow: ['*'], ...PLAN }, measured: { allow: [MEASURED.filename], ...PLAN } } },
    env: envOf(args.env),
    ...(args.bin ? { bin: builtEntry(args.bin) } : {}),
    reader: {
      args: args.processes > 1 ? ['--processes', String(args.processes)] : [],
      nodeArgs: profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
    },
  });
  const base = sys.readerUrl!;
  const created = await runCli(sys.env, ['keys', 'create', '--name', 'bench-measured', '--plan', 'measured']);
  if (created.code !== 0) throw new Error(`keys create failed: ${created.stderr}`);
  // Under --processes the supervisor's CPU counts too (it does little); RSS is the serving processes'.
  const readerCpu = () => cpuMsOf([sys.reader!.pid, ...sys.readerPids.filter((p) => p !== sys.reader!.pid)]);
  const readerRss = () => sys.readerPids.reduce((s, p) => s + memOf(p).rss, 0);
  const rssStart = readerRss();

  const seen = new Map<string, SseEvent>();
  const waiting = new Map<string, (e: SseEvent | undefined) => void>();
  let frameBytes = 0;
  const ref = new SseSocket(base, sys.key, undefined, (e) => {
    frameBytes = Buffer.byteLength(`id: ${e.id}\nevent: ${e.event}\ndata: ${e.data}\n\n`);
    const etag = (JSON.parse(e.data) as { etag: string }).etag;
    seen.set(etag, e);
    if (!waiting.has(etag)) return;
    for (const [k, resolve] of [...waiting]) {
      if (k === etag) break;
      resolve(undefined);
    }
    waiting.get(etag)!(e);
  });
  await ref.opened;
  const poller = new Poller(base, sys.key);
  const etag = (await dropAndPoll(sys, poller, template, undefined)).etag;
  await dropAndPoll(sys, poller, docTemplate(LOADED, args.kb * 1024), undefined);
  const children = await Promise.all(Array.from({ length: Math.max(1, args.procs) }, () => ClientsChild.start()));

  const bench: Bench = {
    machine,
    template,
    sys,
    base,
    bgKey: args['bg-scope'] === 'all' ? sys.key : created.stdout.trim(),
    readerCpu,
    readerRss,
    rssStart,
    ref,
    seen,
    poller,
    children,
    etag,
    get frameBytes() {
      return frameBytes;
    },
    async drop(t) {
      const v = version(t);
      const tmp = join(sys.inbox, `.changes-${process.pid}.tmp`);
      await writeFile(tmp, v.bytes);
      // undefined: no event within 10 s, or a later version's came first (this one was replaced in
      // the inbox before it was claimed: a rename over a file the watcher has not taken yet).
      const event = new Promise<SseEvent | undefined>((resolve) => {
        const timer = setTimeout(() => (waiting.delete(v.etag), resolve(undefined)), 10_000);
        waiting.set(v.etag, (e) => (clearTimeout(timer), waiting.delete(v.etag), resolve(e)));
      });
      const t0 = nowMs();
      await rename(tmp, join(sys.inbox, t.feed.filename));
      bench.etag = v.etag;
      return { t0, event };
    },
    async openStreams(n, key, sampleEvery, url = base) {
      const share = (i: number) => Math.floor(n / children.length) + (i < n % children.length ? 1 : 0);
      const r = await Promise.all(children.map((c, i) => c.open(url, key, share(i), ref.lastId, sampleEvery)));
      const opened = r.reduce((s, x) => s + x.opened, 0);
      if (opened < n) log(`only ${opened} of ${n} streams opened: ${r.find((x) => x.error)?.error}`);
      return opened;
    },
    async latencies(t0, keep) {
      const r = await Promise.all(children.map((c) => c.latencies(t0, keep)));
      return { ms: r.flatMap((x) => x.ms), missing: r.reduce((s, x) => s + x.missing, 0), behind: r.reduce((s, x) => s + x.behind, 0) };
    },
    pids: () => [...sys.pids(), ...children.map((c) => c.pid)],
  };
  await quiesce(bench.pids());
  return bench;
}

/** Part 1: rename → event at the reference client, alone and with background streams and drops. */
async function measureLatency(bench: Bench): Promise<Latencies> {
  const lat: Latencies = {};
  const dropper = await Dropper.start(OTHERS, args.kb * 1024);
  for (const condition of ['alone', 'loaded'] as const) {
    const r = (lat[condition] = { sse: [] as number[], get: [] as number[], bg: [] as number[], note: '' });
    let bgOpen = 0;
    if (condition === 'loaded') {
      bgOpen = await bench.openStreams(args['bg-streams'], bench.bgKey, Math.max(1, Math.floor(args['bg-streams'] / 10)));
      dropper.begin(bench.sys.inbox, args.rate);
      await sleep(1000);
    }
    const t0s: [number, number][] = [];
    let late = 0;
    for (let i = 0; i < args.drops; i++) {
      const d = await bench.drop(bench.template);
      // No event within 10 s: counted, and reported beside the figures rather than ending the run.
      const e = await d.event;
      if (e === undefined) late++;
      else {
        r.sse.push(e.at - d.t0);
        t0s.push([e.id, d.t0]);
      }
      await sleep(30 + Math.random() * 50);
      const p = await dropAndPoll(bench.sys, bench.poller, bench.template, bench.etag);
      bench.etag = p.etag;
      r.get.push(p.fresh);
      await sleep(30 + Math.random() * 50);
    }
    if (condition === 'loaded') {
      const sent = await dropper.end();
      const drained = await waitDrained(bench.sys, 60_000);
      const bg = await bench.latencies(t0s);
      r.bg = bg.ms;
      r.note = `${bgOpen} streams (key: ${args['bg-scope']} feeds), ${Math.round((sent.sent * 1000) / sent.ms)} drops/s${drained ? '' : ', **backlog not drained in 60 s**'}; ${bg.missing} sampled events missing${late ? `; **${late} measured events later than 10 s**` : ''}`;
      await Promise.all(bench.children.map((c) => c.closeAll()));
    }
    log(`${condition}: rename → event p50/p99 ${pct(r.sse)} ms; rename → GET ${pct(r.get)} ms`);
    await quiesce(bench.pids());
  }

  return lat;
}

/** Part 2: waiting long-polls answered after a change, timed from its event at the reference client. */
async function measureLongPoll(bench: Bench): Promise<LongPolls> {
  const lp: number[] = [];
  const lpRename: number[] = [];
  let lpAnswered = 0;
  let lpCpuMs = 0;
  for (let round = 0; round < args['lp-rounds']; round++) {
    const head = ((await (await fetch(`${bench.base}/v1/catalog`, { headers: { 'x-api-key': bench.sys.key } })).json()) as { position: number }).position;
    const share = Math.ceil(args.waiters / bench.children.length);
    await Promise.all(bench.children.map((c) => c.wait(bench.base, bench.sys.key, share, head, 30)));
    await sleep(2000);
    const cpu0 = bench.readerCpu();
    const d = await bench.drop(bench.template);
    const e = await mustHave(d.event);
    const answers = await Promise.all(bench.children.map((c) => c.waited()));
    lpCpuMs += bench.readerCpu() - cpu0;
    for (const a of answers) {
      lpAnswered += a.withChange;
      for (const at of a.at) {
        lp.push(at - e.at);
        lpRename.push(at - d.t0);
      }
    }
    await quiesce(bench.pids());
  }
  log(`long-poll: event → answer p50/p99 ${pct(lp)} ms`);

  return { lp, lpRename, lpAnswered, lpCpuMs };
}

/** Spans of the fan-out part on the clock of V8's CPU profiles (monotonic, µs), to cut the reader's profile (`--cpu-prof`). */
/** The report: every part run, against its target. */
function report(bench: Bench, lat: Latencies, lps: LongPolls | undefined, fo: FanOutResult | undefined): string {
  const rows: string[][] = [];
  const notes: string[] = [];
  for (const c of Object.keys(lat) as ('alone' | 'loaded')[]) {
    const r = lat[c]!;
    const ok = median(r.sse) <= 15 && quantile(r.sse, 0.99) <= 50;
    rows.push([`event latency, ${c}: rename → SSE event (reference client)`, `${pct(r.sse)} ms`, 'p50 ≤ 15 / p99 ≤ 50 ms', verdict(ok)]);
    rows.push([`  for comparison, ${c}: rename → first GET serving it (tight poll)`, `${pct(r.get)} ms`, '', '']);
    if (c === 'loaded') {
      const okBg = median(r.bg) <= 15 && quantile(r.bg, 0.99) <= 50;
      rows.push([
        `  ${c}: rename → SSE event at ${r.bg.length / Math.max(1, r.sse.length)} sampled background streams`,
        `${pct(r.bg)} ms`,
        'p50 ≤ 15 / p99 ≤ 50 ms',
        verdict(okBg),
      ]);
    }
  }
  if (lat.loaded) notes.push(`Latency: ${args.drops} measured drops per condition, each followed by one polled drop; loaded: ${lat.loaded.note}.`);
  if (lps) {
    const { lp, lpRename, lpAnswered, lpCpuMs } = lps;
    rows.push([
      `long-poll: ${args.waiters} waiting, event at the reference client → answer`,
      `${pct(lp)} ms`,
      'p99 ≤ 50 ms',
      verdict(quantile(lp, 0.99) <= 50),
    ]);
    rows.push(['  the same from the rename', `${pct(lpRename)} ms`, '', '']);
    notes.push(
      `Long-poll: ${args['lp-rounds']} rounds of ${args.waiters} GET /v1/changes?since=<head>&wait=30, one change each; ${lpAnswered} of ${lp.length} answers carried it; timed from the moment the change's event reached the reference stream client (the commit is not observable from outside; this leaves the ingest path out). Reader CPU per round (the change and its answers): ${fmtMs(lpCpuMs / Math.max(1, args['lp-rounds']))} ms, ${fmtMs((lpCpuMs * 1000) / Math.max(1, lp.length))} µs per answer.`,
    );
  }
  if (fo) {
    const r = fanOutReport(fo, {
      streams: args.streams,
      sample: args.sample,
      fanRate: args['fan-rate'],
      fanSeconds: args['fan-seconds'],
      fanConflate: args['fan-conflate'],
      frameBytes: bench.frameBytes,
      rssStart: bench.rssStart,
      processes: args.processes,
      afterOtherParts: runs('latency') || runs('long-poll'),
      load: `${loadTool}, ${args['load-connections']} connections, ${args['load-seconds']} s`,
      kb: args.kb,
    });
    rows.push(...r.rows);
    notes.push(...r.notes);
  }
  const out = [
    machineLine(bench.machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; one deployment with a process per role; measured feed \`${MEASURED.filename}\`, ${bench.template.bytes.length} bytes. Latencies are p50 / p99 (nearest rank). Clients are raw sockets on the bench's clock (nowMs()), the background and fan-out ones in ${bench.children.length} child processes, which compete for the same ${bench.machine.nproc} cores; streams that do not time their events only count them, without decoding.`,
    '',
    table(['measure', 'p50 / p99 (or value)', 'target', ''], rows, ['l', 'r', 'l', 'l']),
    '',
    ...notes,
  ].join('\n');
  return out;
}

async function main(): Promise<void> {
  const fanOut = fanOutPart({
    streams: args.streams,
    sample: args.sample,
    fanRate: args['fan-rate'],
    fanSeconds: args['fan-seconds'],
    fanConflate: args['fan-conflate'],
    loadConnections: args['load-connections'],
    loadSeconds: args['load-seconds'],
    env: envOf(args.env),
    floors: args.floors ?? [],
    dataFile: LOADED.filename,
  });
  const profileDir = args['cpu-prof'] ? await tempDir('changes-prof') : undefined;
  const bench = await setUp(profileDir);
  const lat = runs('latency') ? await measureLatency(bench) : {};
  const lps = runs('long-poll') ? await measureLongPoll(bench) : undefined;
  const fo = runs('fan-out') ? await fanOut.measureFanOut(bench) : undefined;
  bench.ref.close();
  bench.poller.close();
  if (profileDir) {
    // The profiles are written as the processes exit.
    await bench.sys.stop();
    process.stdout.write(`\n${(await profileReport(profileDir, fanOut.spans)).join('\n')}\n`);
  }
  // A partial run (--part) prints its report only.
  await publishReport('changes', report(bench, lat, lps, fo), !args['no-doc'] && !args.quick && args.part.length === 0);
}

runMain(main);
