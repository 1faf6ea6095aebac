/**
 * The change feed by transport: what one stream costs the reader over plain HTTP/1.1, HTTP/1.1 on
 * TLS, and HTTP/2 (one stream per connection, and many streams on one connection). For each, a
 * fresh reader process (`start --roles reader`, with or without a certificate made here by the
 * openssl CLI) gets `--streams` streams from clients in child processes, then changes written
 * straight into the change log at `--rate`/s for `--seconds`: the reader's CPU per event written
 * and its RSS per open stream, in the same run, as ratios to plain HTTP/1.1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { TEST_REDIS_URL } from '../test/helpers/redis.js';
import { baseEnv, ROOT, runCli } from '../test/helpers/service.js';
import { benchArgs, commandLine } from './lib/common/cli.js';
import { machineInfo, machineLine } from './lib/common/machine.js';
import { writeConfig } from './lib/common/oddsfiles-system.js';
import { OddsfilesProcess } from './lib/common/oddsfiles-process.js';
import { cpuMs, memOf, quiesce } from './lib/common/proc.js';
import { summarizeProfile } from './lib/common/profile.js';
import { publishReport, table } from './lib/common/report.js';
import { benchPrefix, log, onCleanup, runMain, tempDir } from './lib/common/run.js';
import { selfSignedCert } from '../test/helpers/tls-cert.js';

const args = benchArgs('Change feed by transport: reader CPU per event written and RSS per stream over HTTP/1.1, TLS and HTTP/2.', {
  streams: { type: 'number', default: 2000, quick: 100, description: 'open streams per transport' },
  rate: { type: 'number', default: 10, description: 'changes per second' },
  seconds: { type: 'number', default: 10, quick: 2, description: 'seconds of changes measured per transport' },
  mux: { type: 'number', default: 100, description: 'streams per connection in the multiplexed HTTP/2 case' },
  procs: { type: 'number', default: 2, quick: 1, description: 'child processes holding the clients' },
  rounds: { type: 'number', default: 1, description: 'rounds over the transports (each round in the opposite order of the one before)' },
  transport: { type: 'strings', description: 'run only this transport: http, tls, h2 or h2-mux (repeatable; default all four)' },
  'cpu-prof': { type: 'boolean', description: 'profile each reader (node --cpu-prof) and print where its time went while the changes flowed' },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});

interface Transport {
  readonly id: string;
  readonly name: string;
  readonly tls: boolean;
  readonly client: 'http' | 'tls' | 'h2';
  readonly mux: number;
}
const ALL: Transport[] = [
  { id: 'http', name: 'HTTP/1.1', tls: false, client: 'http', mux: 1 },
  { id: 'tls', name: 'HTTP/1.1 on TLS', tls: true, client: 'tls', mux: 1 },
  { id: 'h2', name: 'HTTP/2, 1 stream per connection', tls: true, client: 'h2', mux: 1 },
  { id: 'h2-mux', name: `HTTP/2, ${args.mux} streams per connection`, tls: true, client: 'h2', mux: args.mux },
];
for (const t of args.transport) if (!ALL.some((a) => a.id === t)) throw new Error(`--transport takes ${ALL.map((a) => a.id).join(' | ')}, not "${t}"`);
const TRANSPORTS = args.transport.length === 0 ? ALL : ALL.filter((t) => args.transport.includes(t.id));
const monoUs = () => Number(process.hrtime.bigint() / 1000n);

interface Result {
  readonly transport: Transport;
  readonly opened: number;
  readonly events: number;
  readonly cpuMs: number;
  readonly rssPerStream: number;
  readonly openSeconds: number;
  readonly load: number;
}

/** A child process of bench/lib/changes/tls-clients-child.mjs. */
class Clients {
  private readonly child: ChildProcess;
  private answer: ((m: { ok: boolean; error?: string } & Record<string, number>) => void) | undefined;
  constructor() {
    this.child = spawn(process.execPath, [join(ROOT, 'bench/lib/changes/tls-clients-child.mjs')], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.child.on('message', (m) => this.answer?.(m as never));
    onCleanup(async () => void this.child.kill());
  }
  async ask(msg: Record<string, unknown>): Promise<Record<string, number>> {
    const reply = await new Promise<{ ok: boolean; error?: string } & Record<string, number>>((r) => ((this.answer = r), this.child.send(msg)));
    if (!reply.ok) throw new Error(`clients: ${reply.error}`);
    return reply;
  }
}

/** `n` changes a second into the change log for `seconds`, of ~200-byte events; how many were written. */
async function writeChanges(redis: Redis, prefix: string, rate: number, seconds: number): Promise<number> {
  const started = Date.now();
  let n = 0;
  while (Date.now() - started < seconds * 1000) {
    const seq = await redis.incr(`${prefix}:catalog:seq`);
    const entry = {
      filename: `site_live_bench_${seq % 50}.json`,
      sha256: seq.toString(16).padStart(64, '0'),
      size: seq,
      generatedAt: new Date().toISOString(),
      publishedAt: new Date().toISOString(),
      generatedAtMs: Date.now(),
    };
    await redis.xadd(`${prefix}:catalog:log`, `${seq}-0`, 'e', JSON.stringify(entry), 'p', '', 't', String(Date.now()));
    n++;
    await sleep(Math.max(0, started + (n * 1000) / rate - Date.now()));
  }
  return n;
}

async function measure(
  t: Transport,
  env: Record<string, string>,
  tlsEnv: Record<string, string>,
  key: string,
  ca: Buffer,
  clients: Clients[],
  redis: Redis,
  dir: string,
): Promise<Result> {
  const profDir = join(dir, `prof-${t.id}-${Date.now()}`);
  const nodeArgs = args['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [];
  const reader = new OddsfilesProcess(t.tls ? tlsEnv : env, ['start', '--roles', 'reader'], join(dir, `reader-${Date.now()}.log`), ['reader'], nodeArgs);
  const span = { fromUs: 0, toUs: 0 };
  try {
    const started = await reader.waitForLine((l) => l.msg === 'oddsfiles started', 'oddsfiles started');
    const url = String(started.reader);
    await quiesce([reader.pid], { maxMs: 3000 });
    const rss0 = memOf(reader.pid).rss;
    const t0 = Date.now();
    const share = (i: number) => Math.floor(args.streams / clients.length) + (i < args.streams % clients.length ? 1 : 0);
    const opened = (
      await Promise.all(clients.map((c, i) => c.ask({ op: 'open', transport: t.client, url, key, n: share(i), mux: t.mux, ca: ca.toString() })))
    ).reduce((s, r) => s + r.opened!, 0);
    const openSeconds = (Date.now() - t0) / 1000;
    await quiesce([reader.pid], { maxMs: 5000 });
    const rssPerStream = (memOf(reader.pid).rss - rss0) / opened;
    const cpu0 = cpuMs(reader.pid);
    const load = loadavg()[0]!;
    span.fromUs = monoUs();
    const changes = await writeChanges(redis, env.REDIS_PREFIX!, args.rate, args.seconds);
    await sleep(1000);
    span.toUs = monoUs();
    const cpu = cpuMs(reader.pid) - cpu0;
    const events = (await Promise.all(clients.map((c) => c.ask({ op: 'count' })))).reduce((s, r) => s + r.events!, 0);
    await Promise.all(clients.map((c) => c.ask({ op: 'close' })));
    log(
      `${t.name}: ${opened} streams in ${openSeconds.toFixed(1)} s, ${changes} changes, ${events} events, reader CPU ${cpu.toFixed(0)} ms, ${(rssPerStream / 1024).toFixed(1)} KB/stream`,
    );
    return { transport: t, opened, events, cpuMs: cpu, rssPerStream, openSeconds, load };
  } finally {
    await reader.stop();
    if (args['cpu-prof']) printProfile(t, profDir, span);
  }
}

/** Where the reader's time went while the changes flowed, by group and function. */
function printProfile(t: Transport, profDir: string, span: { fromUs: number; toUs: number }): void {
  for (const f of readdirSync(profDir).filter((n) => n.endsWith('.cpuprofile'))) {
    const p = summarizeProfile(join(profDir, f), 15, span);
    const pctOf = (ms: number) => `${((100 * ms) / p.busyMs).toFixed(1)} %`;
    log(`${t.name}: profile, busy ${p.busyMs.toFixed(0)} ms`);
    for (const [g, ms] of p.groups) log(`  ${pctOf(ms).padStart(7)}  ${g}`);
    for (const [fn, ms] of p.functions) log(`  ${pctOf(ms).padStart(7)}  ${fn}`);
  }
}

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const dir = await tempDir('changes-tls');
  const prefix = benchPrefix('changes-tls');
  const { certFile, keyFile, ca } = selfSignedCert(dir);
  const config = await writeConfig(dir, { plans: { pro: { allow: ['*'], rate: { max: 1_000_000_000, per: '1m' }, streams: 100_000 } } });
  const env = baseEnv(dir, prefix, { ODDSFILES_CONFIG: config, LOG_LEVEL: 'info' });
  const tlsEnv = { ...env, TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile };
  const created = await runCli(env, ['keys', 'create', '--name', 'bench', '--plan', 'pro']);
  if (created.code !== 0) throw new Error(`keys create failed: ${created.stderr}`);
  const key = created.stdout.trim();
  const redis = new Redis(TEST_REDIS_URL);
  onCleanup(async () => redis.disconnect());
  const clients = Array.from({ length: Math.max(1, args.procs) }, () => new Clients());

  const results: Result[] = [];
  for (let round = 0; round < args.rounds; round++) {
    const order = round % 2 === 0 ? TRANSPORTS : [...TRANSPORTS].reverse();
    for (const t of order) results.push(await measure(t, env, tlsEnv, key, ca, clients, redis, dir));
  }

  const perEvent = (r: Result) => (r.cpuMs * 1000) / Math.max(1, r.events);
  const mean = (t: Transport, f: (r: Result) => number) => {
    const rs = results.filter((r) => r.transport === t);
    return rs.reduce((s, r) => s + f(r), 0) / rs.length;
  };
  const base = TRANSPORTS[0]!;
  const rows = TRANSPORTS.map((t) => [
    t.name,
    mean(t, perEvent).toFixed(2),
    (mean(t, perEvent) / mean(base, perEvent)).toFixed(2),
    (mean(t, (r) => r.rssPerStream) / 1024).toFixed(1),
    (mean(t, (r) => r.rssPerStream) / mean(base, (r) => r.rssPerStream)).toFixed(2),
    `${mean(t, (r) => r.events).toFixed(0)} / ${mean(t, (r) => r.opened).toFixed(0)}`,
    mean(t, (r) => r.openSeconds).toFixed(1),
  ]);
  const loads = results.map((r) => r.load.toFixed(1)).join(', ');
  const md = [
    '# Change feed by transport',
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; ${machineLine(machine)} Load average (1 min) at each measurement: ${loads}.`,
    `A fresh reader process per transport and round; ${args.streams} streams from ${clients.length} client process(es), changes straight into the change log at ${args.rate}/s for ${args.seconds} s. CPU is the reader's (user + system) over the changes and 1 s after, per event its clients counted; RSS is the reader's growth with the streams open, per stream. Ratios are to ${base.name} in the same run${args.rounds > 1 ? `, means of ${args.rounds} rounds in alternating order` : ''}.`,
    '',
    table(['transport', 'CPU µs / event', `× ${base.name}`, 'RSS KB / stream', `× ${base.name}`, 'events / streams', 'open s'], rows),
    '',
  ].join('\n');
  await publishReport('changes-tls', md, !args['no-doc'] && !args.quick && args.transport.length === 0);
}

runMain(main);
