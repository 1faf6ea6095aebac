/**
 * Reader vs nginx: one reader process (`oddsfiles start --roles reader`, as deployed: request log
 * on, plan rate limit counted with tokens leased from Redis) against one nginx worker serving the
 * same bytes as static files (gzip_static with the reader's own gzip bytes), in the same run.
 *
 * Scenarios: GET /v1/data/{200 KB file} with Accept-Encoding: gzip (target ≥ 0.5× nginx),
 * GET /v1/files (target ≥ 0.5× nginx serving the same list as a static file), and the 200 KB file
 * uncompressed (for information). Three more reader processes with settings turned off, and a
 * bare node:http server (with and without the reader's response headers), show where the
 * reader's time goes. Rounds interleaved, order flipped every round, medians. Needs nginx (Debian:
 * `apt-get install -y nginx`); without it the comparison is skipped, said so, and the rest is
 * measured. Load: wrk when installed, else autocannon.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../test/helpers/faults.js';
import { captureReplyHeaders, rawGet, saveSite, startBareNode, type BareNode, type Site } from './lib/bare/node.js';
import { benchArgs, commandLine } from './lib/common/cli.js';
import { loadTool, runLoad } from './lib/common/load.js';
import { machineInfo, machineLine, which } from './lib/common/machine.js';
import { OddsfilesProcess } from './lib/common/oddsfiles-process.js';
import { builtEntry, OddsfilesSystem, writeConfig } from './lib/common/oddsfiles-system.js';
import { Poller, waitHealthy } from './lib/common/poller.js';
import { cpuSplitMs, quiesce } from './lib/common/proc.js';
import { publishReport, table } from './lib/common/report.js';
import { publishExampleSet } from './lib/common/rounds.js';
import { log, onCleanup, runMain, tempDir } from './lib/common/run.js';
import { fmtInt, fmtX, median } from './lib/common/stats.js';

const args = benchArgs('Reader vs nginx: requests per second and CPU per request on the same bytes.', {
  rounds: { type: 'number', default: 3, quick: 1, description: 'measured rounds per scenario and server' },
  duration: { type: 'number', default: 4, quick: 1, description: 'seconds of load per round' },
  connections: { type: 'number', default: 32, quick: 8, description: 'keep-alive connections of the load' },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
  baseline: {
    type: 'string',
    description: 'another checkout, built (or its dist/bin/oddsfiles.js), run as one more reader on the same data (a before/after in one run)',
  },
});
const ROUNDS = args.rounds;
const DURATION = args.duration;
const CONNECTIONS = args.connections;
const WRITE_DOC = !args['no-doc'] && !args.quick;
const BIG = 'site_pregame_northwind_soccer.json';

interface Load {
  rps: number;
  p99ms: number;
  mbps: number;
  /** Server CPU per request, µs (user + system of its processes). */
  cpuUs: number;
  /** Of which in the kernel (system time), µs. */
  sysUs: number;
}

interface Server {
  readonly name: string;
  readonly base: string;
  readonly pids: () => number[];
  /** Measured in every scenario, or only in those with a target. */
  readonly scenarios: 'all' | 'targets';
}

interface Scenario {
  readonly name: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly target?: number;
}

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const nginxBin = which('nginx');
  if (!nginxBin) log('nginx is not installed (Debian: apt-get install -y nginx): the nginx comparison is SKIPPED, only the reader is measured.');
  if (!which('wrk')) log('wrk is not installed (Debian: apt-get install -y wrk): using autocannon in this process instead.');

  // Publish the example registry: one 200 KB file, the others about 4 KB.
  const sys = await OddsfilesSystem.start({ label: 'nginx', shape: 'pair' });
  const big = await publishAndHold(sys);
  // The readers alone from now on: the one as deployed, and variants that show where its time
  // goes (same binary, same data and Redis prefix, each its own process).
  await sys.procs.find((p) => !p.roles.includes('reader'))!.stop();
  const reader: Server = { name: 'reader (as deployed)', base: sys.readerUrl!, pids: () => [sys.reader!.pid], scenarios: 'all' };
  const variants = await startReaderVariants(sys, big);

  // The exact bytes the reader answers, as static files for nginx.
  const dir = await tempDir('nginx');
  const site = await saveSite(dir, reader.base, sys.key, BIG);

  // What the API's response headers alone cost a Node server: the bare server sending the reader's own.
  const withHeaders = await captureReplyHeaders(reader.base, sys.key, BIG);
  const servers: Server[] = [
    reader,
    ...variants,
    bareServer(await startBareNode(dir, sys.key, BIG, withHeaders), 'targets'),
    bareServer(await startBareNode(dir, sys.key, BIG), 'all'),
  ];
  if (nginxBin) servers.unshift({ ...(await startNginx(nginxBin, dir)), scenarios: 'all' });

  const scenarios = scenariosOf(site);
  await checkSameBytes(scenarios, servers, sys.key);
  const rows: string[][] = [];
  const started = Date.now();
  for (const s of scenarios) rows.push(...(await measureScenario(s, servers, reader, sys.key, nginxBin !== undefined)));
  const measuredS = Math.round((Date.now() - started) / 1000);
  await sys.stop();
  await publishReport('reader-nginx', report(machine, measuredS, nginxBin !== undefined, rows), WRITE_DOC);
}

/** Publish the example set, and wait until the reader holds the big file compressed both ways. */
async function publishAndHold(sys: OddsfilesSystem): Promise<{ sha256: string }> {
  const versions = await publishExampleSet(sys, BIG);
  const poller = new Poller(sys.readerUrl!, sys.key);
  const big = versions.find((v) => v.name === BIG)!;
  for (const [coding, suffix] of [
    ['gzip', 'gz'],
    ['br', 'br'],
  ] as const) {
    await poller.untilHeld(`/v1/data/${BIG}`, `"${big.sha256.slice(0, 32)}-${suffix}"`, { 'accept-encoding': coding });
  }
  poller.close();
  return big;
}

/** The reader again in processes of their own, each with one setting changed (or `--baseline`'s build). */
async function startReaderVariants(sys: OddsfilesSystem, big: { sha256: string }): Promise<Server[]> {
  const errorsOnly = await writeConfig(sys.dataDir, { reader: { request_log: 'errors' } });
  const errorsOnlyNoRate = await writeConfig(sys.dataDir, { reader: { request_log: 'errors' }, plans: { pro: { allow: ['*'] } } });
  const fastifyOnly = await writeConfig(sys.dataDir, { reader: { hot_path: false } });
  const variants: Server[] = [];
  const variantSpecs: [string, Record<string, string>, string | undefined][] = [
    ["reader, `hot_path: false` (every /v1 request through Fastify's routes)", { ODDSFILES_CONFIG: fastifyOnly }, undefined],
    ['reader, `request_log: errors` (no log line for a 200)', { ODDSFILES_CONFIG: errorsOnly }, undefined],
    ['reader, `request_log: errors`, plan without rate (no limit to count)', { ODDSFILES_CONFIG: errorsOnlyNoRate }, undefined],
  ];
  if (args.baseline)
    variantSpecs.unshift([`reader, baseline build (${args.baseline})`, {}, args.baseline.endsWith('.js') ? args.baseline : builtEntry(args.baseline)]);
  for (const [name, env, bin] of variantSpecs) {
    // A port of its own, known in advance.
    const port = await freePort();
    const p = new OddsfilesProcess(
      { ...sys.env, ...env, PORT: String(port) },
      ['start', '--roles', 'reader'],
      join(sys.dataDir, `variant${variants.length}.log`),
      ['reader'],
      [],
      bin,
    );
    onCleanup(() => p.stop());
    const base = `http://127.0.0.1:${port}`;
    variants.push({ name, base, pids: () => [p.pid], scenarios: 'targets' });
    // Wait until it listens and holds the big file compressed.
    await waitHealthy(base, name);
    const vp = new Poller(base, sys.key);
    await vp.untilHeld(`/v1/data/${BIG}`, `"${big.sha256.slice(0, 32)}-gz"`, { 'accept-encoding': 'gzip' });
    vp.close();
  }

  return variants;
}

function scenariosOf(site: Site): Scenario[] {
  return [
    {
      name: `GET /v1/data, ${Math.round(site.identity.length / 1024)} KB, gzip (${Math.round(site.gzip.length / 1024)} KB sent)`,
      path: `/v1/data/${BIG}`,
      headers: { 'accept-encoding': 'gzip' },
      target: 0.5,
    },
    { name: `GET /v1/files (${site.files.length} B)`, path: '/v1/files', headers: {}, target: 0.5 },
    { name: `GET /v1/data, ${Math.round(site.identity.length / 1024)} KB, identity`, path: `/v1/data/${BIG}`, headers: {} },
  ];
}

/** The same bytes from every server (checked once per scenario). */
async function checkSameBytes(scenarios: readonly Scenario[], servers: readonly Server[], key: string): Promise<void> {
  for (const s of scenarios) {
    const bodies = await Promise.all(servers.map((srv) => rawGet(`${srv.base}${s.path}`, { 'x-api-key': key, ...s.headers })));
    if (bodies.some((b) => b.status !== 200 || !b.bytes.equals(bodies[0]!.bytes))) throw new Error(`${s.name}: the servers do not answer the same bytes`);
  }
}

/** Rounds of load on every server the scenario measures, interleaved; one row per server. */
async function measureScenario(s: Scenario, servers: readonly Server[], reader: Server, key: string, nginx: boolean): Promise<string[][]> {
  const rows: string[][] = [];
  const these = servers.filter((srv) => srv.scenarios === 'all' || s.target !== undefined);
  const runs = new Map<string, Load[]>(these.map((srv) => [srv.name, []]));
  for (const srv of these) await load(srv, s, key, 1);
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? these : [...these].reverse();
    for (const srv of order) {
      await quiesce(
        these.flatMap((x) => x.pids()),
        { maxMs: 2000 },
      );
      runs.get(srv.name)!.push(await load(srv, s, key, DURATION));
    }
  }
  const med = (name: string, k: keyof Load) => median(runs.get(name)!.map((x) => x[k]));
  const ref = nginx ? med('nginx', 'rps') : Number.NaN;
  for (const srv of these) {
    const rps = med(srv.name, 'rps');
    const ratio = rps / ref;
    const isRef = srv.name === 'nginx';
    const deployed = srv === reader;
    rows.push([
      s.name,
      srv.name,
      fmtInt(rps),
      isRef ? '1.00×' : nginx ? (deployed ? `**${fmtX(ratio)}**` : fmtX(ratio)) : 'nginx skipped',
      med(srv.name, 'p99ms').toFixed(1),
      `${fmtInt(med(srv.name, 'cpuUs'))} (${fmtInt(med(srv.name, 'sysUs'))})`,
      deployed ? (s.target === undefined ? '(information)' : nginx ? (ratio >= s.target ? 'met' : '**missed**') : 'not measured') : '',
    ]);
  }
  log(`${s.name}: ${[...runs].map(([n, l]) => `${n} ${l.map((x) => fmtInt(x.rps)).join(' ')}`).join(' | ')}`);
  return rows;
}

function report(machine: ReturnType<typeof machineInfo>, measuredS: number, nginx: boolean, rows: string[][]): string {
  return [
    machineLine(machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; load: ${loadTool}, ${CONNECTIONS} keep-alive connections; per scenario 1 s warm-up each, then ${ROUNDS} rounds of ${DURATION} s per server, interleaved (order flipped every round), medians; ${measuredS} s of load in all.${nginx ? '' : ' **nginx not installed: comparison skipped.**'}`,
    '',
    '- reader: `oddsfiles start --roles reader` alone (the watcher+worker that published the files stopped), its `/v1` GETs taken by the front door (`reader.hot_path`, the default: src/reader/data/front-door.ts), `LOG_LEVEL=info` (one log line per request, to a file), the plan rate limit counted with tokens leased from Redis in blocks (the `pro` plan with a rate too high to trip), the key in `X-API-Key`.',
    '- three more reader processes on the same data show where its time goes: every /v1 request through Fastify routes (`reader.hot_path: false`); with `--baseline`, another build on the same data; without the request log line for successful requests (`reader.request_log: errors`, the setting for busy readers); and also without the plan rate limit (a `pro` plan without `rate`). Measured in the two scenarios with a target.',
    '- bare node:http: the same bytes from Buffers after a key lookup, nothing else, in its own process: what any single Node process can do here, the ceiling of the reader.',
    "- bare node:http + the reader's response headers: the same server sending, with each answer, the headers the reader sent with it (captured once: ETag, Cache-Control, Content-Type, the five rate-limit fields; Last-Modified, Vary and Content-Encoding on downloads), handed to `writeHead` as one flat list as the front door does: what the API's response headers alone cost a Node server. Measured in the two scenarios with a target.",
    "- nginx: `worker_processes 1`, `daemon off`, access log on (to a file), `sendfile on`, `open_file_cache`, `keepalive_requests 10000` (as the reader's `maxRequestsPerSocket`), `gzip_static on` + `gzip_vary on` serving the reader's own gzip bytes; `/v1/files` is the reader's answer saved as a file. It ignores the key.",
    '',
    table(['scenario', 'server', 'req/s', 'vs nginx', 'p99 ms', 'server CPU µs per request (of which kernel)', 'target ≥ 0.5×'], rows, [
      'l',
      'l',
      'r',
      'r',
      'r',
      'r',
      'l',
    ]),
  ].join('\n');
}

/** A bare node:http server (bench/lib/bare/node.ts) as one of the servers measured. */
function bareServer(bare: BareNode, scenarios: Server['scenarios']): Server {
  return { name: bare.name, base: bare.base, pids: () => [bare.pid], scenarios };
}

async function startNginx(bin: string, dir: string): Promise<Omit<Server, 'scenarios'>> {
  const port = await freePort();
  await mkdir(join(dir, 'tmp'), { recursive: true });
  // The worker may run as another user: let it read the files.
  await chmod(dir, 0o755);
  const conf = `
${process.getuid?.() === 0 ? 'user root;' : ''}
worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/tmp/body;
  proxy_temp_path ${dir}/tmp/proxy;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi;
  scgi_temp_path ${dir}/tmp/scgi;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 75s;
  keepalive_requests 10000;
  open_file_cache max=1000 inactive=60s;
  default_type application/json;
  server {
    listen 127.0.0.1:${port};
    location = /v1/files { alias ${dir}/www/files.json; }
    location /v1/data/ { alias ${dir}/www/data/; gzip_static on; gzip_vary on; }
  }
}
`;
  const confPath = join(dir, 'nginx.conf');
  await writeFile(confPath, conf);
  const test = spawnSync(bin, ['-t', '-c', confPath, '-p', dir], { encoding: 'utf8' });
  if (test.status !== 0) throw new Error(`nginx -t: ${test.stderr}`);
  const child: ChildProcess = spawn(bin, ['-c', confPath, '-p', dir], { stdio: ['ignore', 'ignore', 'inherit'] });
  onCleanup(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGQUIT');
      await new Promise((r) => child.once('exit', r));
    }
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const ok = await fetch(`${base}/v1/files`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (i > 100) throw new Error('nginx did not start');
    await sleep(50);
  }
  // The master and its one worker.
  const pids = () => {
    const out = spawnSync('pgrep', ['-P', String(child.pid)], { encoding: 'utf8' }).stdout.trim();
    return [child.pid!, ...out.split('\n').filter(Boolean).map(Number)];
  };
  return { name: 'nginx', base, pids };
}

/** One load run on `srv`, with the CPU its processes spent per request. */
async function load(srv: Server, s: Scenario, key: string, seconds: number): Promise<Load> {
  const pids = srv.pids();
  const split = () => pids.map(cpuSplitMs).reduce((a, c) => ({ user: a.user + c.user, system: a.system + c.system }), { user: 0, system: 0 });
  const cpu0 = split();
  const result = await runLoad({ url: `${srv.base}${s.path}`, headers: { 'x-api-key': key, ...s.headers }, connections: CONNECTIONS, seconds });
  const cpu1 = split();
  const perRequest = (ms: number) => (ms * 1000) / result.requests;
  return {
    rps: result.rps,
    p99ms: result.p99ms,
    mbps: result.mbps,
    cpuUs: perRequest(cpu1.user - cpu0.user + cpu1.system - cpu0.system),
    sysUs: perRequest(cpu1.system - cpu0.system),
  };
}

runMain(main);
