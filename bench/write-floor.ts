/**
 * The floor of writing small events to many TCP sockets on this machine: the server's CPU per
 * event delivered when every stream gets each event, for a C program doing one write(2) per
 * socket (bench/lib/bare/write-floor.c, compiled here with `cc -O2`), a node:net server, the bare
 * node:http server of the change feed's references (the denominator of the ratios) and a node:net
 * server writing with fs.writeSync on the socket's descriptor; each with one event per write and
 * with several joined per write. Each run a fresh server process, the same client process
 * (bench/lib/bare/sink-clients.mjs) holding the streams; rounds in alternating order, medians.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { BareFanout } from './lib/bare/fanout.js';
import { benchArgs, commandLine } from './lib/common/cli.js';
import { machineInfo, machineLine, which } from './lib/common/machine.js';
import { quiesce } from './lib/common/proc.js';
import { publishReport, table } from './lib/common/report.js';
import { log, onCleanup, runMain, tempDir } from './lib/common/run.js';
import { fmtInt, fmtX, median } from './lib/common/stats.js';

const KINDS = ['c', 'node-net', 'node-http', 'node-fd'] as const;
type Kind = (typeof KINDS)[number];

const args = benchArgs('The floor of writing small events to many TCP sockets: server CPU per event, a C program against Node servers.', {
  streams: { type: 'number', default: 2000, quick: 200, description: 'streams (loopback TCP connections) written to' },
  rate: { type: 'number', default: 10, description: 'events per second to every stream' },
  seconds: { type: 'number', default: 8, quick: 2, description: 'seconds of events per run' },
  rounds: { type: 'number', default: 5, quick: 1, description: 'rounds over the variants (each round in the opposite order of the one before)' },
  joined: { type: 'number', default: 10, description: 'events joined into one write in the joined variants' },
  bytes: { type: 'number', default: 200, description: 'bytes per event' },
  server: { type: 'strings', description: `run only this server: ${KINDS.join(', ')} (repeatable; default all)` },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});
for (const s of args.server) if (!KINDS.includes(s as Kind)) throw new Error(`--server takes ${KINDS.join(' | ')}, not "${s}"`);
if (args.joined < 2 || (args.rate * args.seconds) % args.joined !== 0) throw new Error('--joined must be at least 2 and divide --rate × --seconds');

const HERE = dirname(fileURLToPath(import.meta.url));
const C_SOURCE = join(HERE, 'lib/bare/write-floor.c');
const CLIENTS = join(HERE, 'lib/bare/sink-clients.mjs');

interface Variant {
  readonly kind: Kind;
  readonly perWrite: number;
  readonly name: string;
}

interface Sample {
  readonly cpuMs: number;
  readonly systemMs: number;
  readonly writes: number;
  readonly written: number;
  readonly delivered: number;
  /** Writes not taken whole: EAGAIN, short or failed (c), left to socket.write (node-fd). */
  readonly notWhole: number;
  readonly load: number;
}

/** What a server reports over a run. */
interface RunResult {
  readonly written: number;
  readonly writes: number;
  readonly userMs: number;
  readonly systemMs: number;
  readonly notWhole: number;
}

interface Server {
  readonly pid: number;
  readonly port: number;
  /** Once it holds every stream. */
  ready(): Promise<void>;
  run(): Promise<RunResult>;
  end(): Promise<void>;
}

/** Lines of a child's stdout, in order, each awaited once. */
function lines(child: ChildProcess): () => Promise<string> {
  const queue: string[] = [];
  const waiting: { resolve: (l: string) => void; reject: (e: Error) => void }[] = [];
  let closed = false;
  const rl = createInterface({ input: child.stdout! });
  rl.on('line', (l) => (waiting.length > 0 ? waiting.shift()!.resolve(l) : queue.push(l)));
  rl.on('close', () => {
    closed = true;
    for (const w of waiting.splice(0)) w.reject(new Error(`write-floor exited (${child.exitCode ?? child.signalCode})`));
  });
  return () =>
    queue.length > 0
      ? Promise.resolve(queue.shift()!)
      : closed
        ? Promise.reject(new Error('write-floor exited'))
        : new Promise((resolve, reject) => waiting.push({ resolve, reject }));
}

/** The C program: its port from its first line; a line on stdin starts the run; stdin closed ends it. */
async function cServer(bin: string, perWrite: number): Promise<Server> {
  const child = spawn(bin, [args.streams, args.rate, args.seconds, perWrite, args.bytes].map(String), { stdio: ['pipe', 'pipe', 'inherit'] });
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  onCleanup(async () => void (gone() ? undefined : child.kill('SIGKILL')));
  const next = lines(child);
  const json = async () => JSON.parse(await next()) as Record<string, number>;
  const { port } = await json();
  return {
    pid: child.pid!,
    port: port!,
    async ready() {
      const r = await json();
      if (r.ready !== args.streams) throw new Error(`write-floor: ${r.ready} streams`);
    },
    async run() {
      child.stdin!.write('go\n');
      const r = await json();
      return { written: r.events!, writes: r.writes!, userMs: r.userMs!, systemMs: r.systemMs!, notWhole: r.eagain! + r.short! + r.errors! };
    },
    async end() {
      if (gone()) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.stdin!.end();
      const t = setTimeout(() => child.kill('SIGKILL'), 2000);
      await exited;
      clearTimeout(t);
    },
  };
}

/** bench/lib/bare/fanout-child.mjs in the mode of `kind`. */
async function nodeServer(kind: Exclude<Kind, 'c'>, perWrite: number): Promise<Server> {
  const fan = await BareFanout.start({ BARE_MODE: kind.slice('node-'.length) });
  return {
    pid: fan.pid,
    port: Number(new URL(fan.url).port),
    ready: async () => undefined,
    async run() {
      const r = await fan.run(args.rate, args.seconds, args.bytes, perWrite);
      if (r.streams !== args.streams) throw new Error(`${kind}: ${r.streams} streams`);
      return { written: r.writes, writes: r.writes / perWrite, userMs: r.userMs, systemMs: r.systemMs, notWhole: r.fallbacks };
    },
    end: () => fan.end(),
  };
}

/** The client process (bench/lib/bare/sink-clients.mjs), kept for the whole run. */
class Clients {
  private readonly child: ChildProcess;
  private answer: ((m: { ok: boolean; error?: string } & Record<string, number>) => void) | undefined;
  constructor() {
    this.child = spawn(process.execPath, [CLIENTS], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.child.on('message', (m) => this.answer?.(m as never));
    onCleanup(async () => void this.child.kill());
  }
  get pid(): number {
    return this.child.pid!;
  }
  async ask(msg: Record<string, unknown>): Promise<Record<string, number>> {
    const reply = await new Promise<{ ok: boolean; error?: string } & Record<string, number>>((r) => ((this.answer = r), this.child.send(msg)));
    if (!reply.ok) throw new Error(`clients: ${reply.error}`);
    return reply;
  }
}

/** `cc -O2` of the C program into a temporary folder; why not, when it cannot. */
async function compile(): Promise<{ bin: string } | { skipped: string }> {
  const cc = which('cc');
  if (!cc) return { skipped: 'no `cc` on PATH' };
  const bin = join(await tempDir('write-floor'), 'write-floor');
  const r = spawnSync(cc, ['-O2', '-o', bin, C_SOURCE], { encoding: 'utf8' });
  if (r.status !== 0) return { skipped: `\`cc -O2\` failed: ${(r.stderr || r.error?.message || '').trim().split('\n')[0]}` };
  return { bin };
}

async function measure(v: Variant, clients: Clients, bin: string | undefined): Promise<Sample> {
  const server = v.kind === 'c' ? await cServer(bin!, v.perWrite) : await nodeServer(v.kind, v.perWrite);
  try {
    await clients.ask({ op: 'open', port: server.port, n: args.streams });
    await server.ready();
    await quiesce([server.pid, clients.pid], { maxMs: 5000 });
    const load = loadavg()[0]!;
    const r = await server.run();
    // What is still in flight reaches the clients before they are counted.
    await sleep(500);
    const { bodyBytes } = await clients.ask({ op: 'count' });
    await clients.ask({ op: 'close' });
    const delivered = Math.floor(bodyBytes! / args.bytes);
    const s = { cpuMs: r.userMs + r.systemMs, systemMs: r.systemMs, writes: r.writes, written: r.written, delivered, notWhole: r.notWhole, load };
    log(
      `${v.name}: ${fmtInt(s.writes)} writes, ${fmtInt(delivered)} events delivered (${fmtInt(r.written)} written), CPU ${s.cpuMs.toFixed(0)} ms: ${((1000 * s.cpuMs) / delivered).toFixed(2)} µs per event${r.notWhole ? `, ${r.notWhole} writes not taken whole` : ''}`,
    );
    return s;
  } finally {
    await server.end();
  }
}

async function main(): Promise<void> {
  const started = Date.now();
  const machine = machineInfo();
  log(machineLine(machine));
  const kinds = args.server.length === 0 ? [...KINDS] : KINDS.filter((k) => args.server.includes(k));
  const built = kinds.includes('c') ? await compile() : undefined;
  const skipped = built && 'skipped' in built ? built.skipped : undefined;
  if (skipped) log(`c: skipped, ${skipped}`);
  const variants: Variant[] = kinds
    .filter((k) => k !== 'c' || !skipped)
    .flatMap((kind) => [1, args.joined].map((perWrite) => ({ kind, perWrite, name: `${kind}, ${perWrite} event${perWrite > 1 ? 's' : ''} per write` })));
  const clients = new Clients();
  const samples = new Map<Variant, Sample[]>(variants.map((v) => [v, []]));
  for (let round = 0; round < args.rounds; round++) {
    for (const v of round % 2 === 0 ? variants : [...variants].reverse())
      samples.get(v)!.push(await measure(v, clients, built && 'bin' in built ? built.bin : undefined));
    log(`round ${round + 1}/${args.rounds} done`);
  }

  const perEvent = (s: Sample) => (1000 * s.cpuMs) / s.delivered;
  const med = (v: Variant, f: (s: Sample) => number) => median(samples.get(v)!.map(f));
  const ref = variants.find((v) => v.kind === 'node-http' && v.perWrite === 1);
  const of = (kind: Kind, perWrite = 1) => variants.find((v) => v.kind === kind && v.perWrite === perWrite);
  const us = (v: Variant | undefined) => (v ? med(v, perEvent) : Number.NaN);
  const kernel = (v: Variant) => med(v, (s) => (100 * s.systemMs) / s.cpuMs);
  const rows = variants.map((v) => {
    const ss = samples.get(v)!;
    const per = ss.map(perEvent);
    const notWhole = ss.reduce((n, s) => n + s.notWhole, 0);
    return [
      v.name,
      us(v).toFixed(2),
      `${Math.min(...per).toFixed(2)}–${Math.max(...per).toFixed(2)}`,
      Number.isFinite(kernel(v)) ? `${kernel(v).toFixed(0)} %` : '—',
      fmtInt(med(v, (s) => s.writes)),
      fmtInt(med(v, (s) => s.delivered)),
      fmtX(us(v) / us(ref)),
      v.kind === 'c' || v.kind === 'node-fd' ? fmtInt(notWhole) : '—',
    ];
  });
  const lost = variants.flatMap((v) =>
    samples
      .get(v)!
      .filter((s) => s.delivered !== s.written)
      .map((s) => `${v.name}: ${s.delivered} of ${s.written}`),
  );
  const loads = variants.flatMap((v) => samples.get(v)!.map((s) => s.load));
  const complete = ref && of('c') && of('node-fd') && of('node-net') && of('c', args.joined) && of('node-http', args.joined);
  const c1 = us(of('c')) / us(ref);
  const notes = () => [
    `With one event per write the C program's ${us(of('c')).toFixed(2)} µs per event is the floor: one write(2) per event and socket, ${kernel(of('c')!).toFixed(0)} % of it in the kernel (on loopback the sender's call also does the receiving side's TCP work). No server writing each event in a write of its own goes below its ratio to node:http, ${fmtX(c1)}${c1 > 0.7 ? ': a ratio of 0.7× is below this floor' : ''}.`,
    `What Node adds above the system call per event: node-fd ${(us(of('node-fd')) - us(of('c'))).toFixed(2)} µs, node-net ${(us(of('node-net')) - us(of('c'))).toFixed(2)} µs, node-http ${(us(ref) - us(of('c'))).toFixed(2)} µs.`,
    `Joining ${args.joined} events per write: ${us(of('c', args.joined)).toFixed(2)} µs per event in C, ${us(of('node-http', args.joined)).toFixed(2)} µs in node:http; the cost is per write call, not per byte.`,
  ];
  const md = [
    machineLine(machine),
    '',
    `Run: ${new Date(started).toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; ${Math.round((Date.now() - started) / 1000)} s in all; load average (1 min) at the start of the runs ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)}.`,
    '',
    `${args.streams} streams on 127.0.0.1 (TCP_NODELAY), held by one client process that reads and discards; a ${args.bytes}-byte event to every stream ${args.rate} times a second for ${args.seconds} s per run; a fresh server process per run; ${args.rounds > 1 ? `${args.rounds} rounds, the order reversed every round` : '1 round'}. CPU is the server's own (user + system) over its run, per event the clients received; medians of the rounds and their range. Node servers write 100 streams per turn of the event loop.`,
    '',
    table(
      ['server, events per write', 'µs CPU / event', 'range', 'kernel', 'writes / run', 'events / run', '× node-http, 1 per write', 'writes not taken whole'],
      rows,
    ),
    '',
    ...(skipped ? [`c: skipped, ${skipped}.`, ''] : []),
    'Writes not taken whole (all rounds): c, EAGAIN or short (counted, not retried); node-fd, left to `socket.write` (nothing queued on the socket is required for the direct write).',
    ...(lost.length > 0 ? ['', `Events written but not received: ${lost.join('; ')}.`] : []),
    '',
    ...(complete ? notes().flatMap((n) => [n, '']) : []),
  ].join('\n');
  await publishReport('write-floor', md, !args['no-doc'] && !args.quick && args.server.length === 0);
}

runMain(main);
