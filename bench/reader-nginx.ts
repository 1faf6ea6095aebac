/**
 * Reader vs nginx: one reader process (`oddsfiles start --roles reader`, as deployed: request log
 * on, plan rate limit counted with tokens leased from Redis) against one nginx worker serving the same bytes as static
 * files (gzip_static with the reader's own gzip bytes), in the same run.
 *
 *   npx tsx bench/reader-nginx.ts [--rounds 3] [--duration 4] [--connections 32] [--no-doc]
 *
 * Scenarios: GET /v1/data/{200 KB file} with Accept-Encoding: gzip (target ≥ 0.5× nginx),
 * GET /v1/files (target ≥ 0.5× nginx serving the same list as a static file), and the 200 KB file
 * uncompressed (for information). Load: wrk (one thread, keep-alive), else autocannon in this
 * process. Rounds interleaved, order flipped every round, medians. Needs nginx and wrk (Debian:
 * `apt-get install -y nginx wrk`); without nginx the comparison is skipped with a message and only
 * the reader is measured.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import autocannon from 'autocannon';
import {
  cpuSplitMs,
  fmtInt,
  fmtX,
  freePort,
  log,
  machineInfo,
  machineLine,
  median,
  OddsfilesProcess,
  OddsfilesSystem,
  onCleanup,
  publishExampleSet,
  Poller,
  quiesce,
  runMain,
  sleep,
  table,
  tempDir,
  which,
  writeConfig,
  writeDocSection,
  numberArg,
} from './common.js';
import { captureReplyHeaders, rawGet, saveSite, startBareNode, type BareNode } from './bare-node.js';

const args = process.argv.slice(2);
const opt = (name: string, fallback: number) => numberArg(name, fallback, args);
const ROUNDS = opt('rounds', 3);
const DURATION = opt('duration', 4);
const CONNECTIONS = opt('connections', 32);
const WRITE_DOC = !args.includes('--no-doc');
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
  const wrkBin = which('wrk');
  if (!nginxBin) log('nginx is not installed (Debian: apt-get install -y nginx): the nginx comparison is SKIPPED, only the reader is measured.');
  if (!wrkBin) log('wrk is not installed (Debian: apt-get install -y wrk): using autocannon in this process instead.');

  // Publish the example registry: one 200 KB file, the others about 4 KB.
  const sys = await OddsfilesSystem.start({ label: 'nginx', shape: 'pair' });
  const versions = await publishExampleSet(sys, BIG);
  const poller = new Poller(sys.readerUrl!, sys.key);
  const big = versions.find((v) => v.name === BIG)!;
  for (const coding of ['gzip', 'br']) {
    const want = `"${big.sha256.slice(0, 32)}-${coding === 'gzip' ? 'gz' : 'br'}"`;
    while ((await poller.get(`/v1/data/${BIG}`, { 'accept-encoding': coding, 'if-none-match': want })).status !== 304) await sleep(20);
  }
  poller.close();
  // The readers alone from now on: the one as deployed, and two variants that show where its
  // time goes (same binary, same data and Redis prefix, each its own process).
  await sys.procs.find((p) => !p.roles.includes('reader'))!.stop();
  const reader: Server = { name: 'reader (as deployed)', base: sys.readerUrl!, pids: () => [sys.reader!.pid], scenarios: 'all' };
  const errorsOnly = await writeConfig(sys.dataDir, { reader: { request_log: 'errors' } });
  const errorsOnlyNoRate = await writeConfig(sys.dataDir, { reader: { request_log: 'errors' }, plans: { pro: { allow: ['*'] } } });
  const fastifyOnly = await writeConfig(sys.dataDir, { reader: { hot_path: false } });
  const variants: Server[] = [];
  for (const [name, env] of [
    ['reader, `hot_path: false` (every request through Fastify)', { ODDSFILES_CONFIG: fastifyOnly }],
    ['reader, `request_log: errors` (no log line for a 200)', { ODDSFILES_CONFIG: errorsOnly }],
    ['reader, `request_log: errors`, plan without rate (no limit to count)', { ODDSFILES_CONFIG: errorsOnlyNoRate }],
  ] as const) {
    // A port of its own, known in advance.
    const port = await freePort();
    const p = new OddsfilesProcess({ ...sys.env, ...env, PORT: String(port) }, ['start', '--roles', 'reader'], join(sys.dataDir, `variant${variants.length}.log`), ['reader']);
    onCleanup(() => p.stop());
    const base = `http://127.0.0.1:${port}`;
    variants.push({ name, base, pids: () => [p.pid], scenarios: 'targets' });
    // Wait until it listens and holds the big file compressed.
    const vp = new Poller(base, sys.key);
    for (let i = 0; !(await fetch(`${base}/healthz`).then((r) => r.ok, () => false)); i++) {
      if (i > 300) throw new Error(`${name} did not start`);
      await sleep(50);
    }
    const want = `"${big.sha256.slice(0, 32)}-gz"`;
    while ((await vp.get(`/v1/data/${BIG}`, { 'accept-encoding': 'gzip', 'if-none-match': want })).status !== 304) await sleep(20);
    vp.close();
  }

  // The exact bytes the reader answers, as static files for nginx.
  const dir = await tempDir('nginx');
  const site = await saveSite(dir, reader.base, sys.key, BIG);

  // What the contract's headers alone cost a Node server: the bare server sending the reader's own.
  const withHeaders = await captureReplyHeaders(reader.base, sys.key, BIG);
  const servers: Server[] = [
    reader,
    ...variants,
    bareServer(await startBareNode(dir, sys.key, BIG, withHeaders), 'targets'),
    bareServer(await startBareNode(dir, sys.key, BIG), 'all'),
  ];
  if (nginxBin) servers.unshift({ ...(await startNginx(nginxBin, dir)), scenarios: 'all' });

  const scenarios: Scenario[] = [
    { name: `GET /v1/data, ${Math.round(site.identity.length / 1024)} KB, gzip (${Math.round(site.gzip.length / 1024)} KB sent)`, path: `/v1/data/${BIG}`, headers: { 'accept-encoding': 'gzip' }, target: 0.5 },
    { name: `GET /v1/files (${site.files.length} B)`, path: '/v1/files', headers: {}, target: 0.5 },
    { name: `GET /v1/data, ${Math.round(site.identity.length / 1024)} KB, identity`, path: `/v1/data/${BIG}`, headers: {} },
  ];
  // Same bytes from both (checked once per scenario).
  for (const s of scenarios) {
    const bodies = await Promise.all(servers.map((srv) => rawGet(`${srv.base}${s.path}`, { 'x-api-key': sys.key, ...s.headers })));
    if (bodies.some((b) => b.status !== 200 || !b.bytes.equals(bodies[0]!.bytes))) throw new Error(`${s.name}: the servers do not answer the same bytes`);
  }

  const rows: string[][] = [];
  const started = Date.now();
  for (const s of scenarios) {
    const these = servers.filter((srv) => srv.scenarios === 'all' || s.target !== undefined);
    const runs = new Map<string, Load[]>(these.map((srv) => [srv.name, []]));
    for (const srv of these) await load(wrkBin, srv, s, sys.key, 1);
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? these : [...these].reverse();
      for (const srv of order) {
        await quiesce(these.flatMap((x) => x.pids()), { maxMs: 2000 });
        runs.get(srv.name)!.push(await load(wrkBin, srv, s, sys.key, DURATION));
      }
    }
    const med = (name: string, k: keyof Load) => median(runs.get(name)!.map((x) => x[k]));
    const ref = nginxBin ? med('nginx', 'rps') : Number.NaN;
    for (const srv of these) {
      const rps = med(srv.name, 'rps');
      const ratio = rps / ref;
      const isRef = srv.name === 'nginx';
      const deployed = srv === reader;
      rows.push([
        s.name,
        srv.name,
        fmtInt(rps),
        isRef ? '1.00×' : nginxBin ? (deployed ? `**${fmtX(ratio)}**` : fmtX(ratio)) : 'nginx skipped',
        med(srv.name, 'p99ms').toFixed(1),
        `${fmtInt(med(srv.name, 'cpuUs'))} (${fmtInt(med(srv.name, 'sysUs'))})`,
        deployed ? (s.target === undefined ? '(information)' : nginxBin ? (ratio >= s.target ? 'met' : '**missed**') : 'not measured') : '',
      ]);
    }
    log(`${s.name}: ${[...runs].map(([n, l]) => `${n} ${l.map((x) => fmtInt(x.rps)).join(' ')}`).join(' | ')}`);
  }
  const measuredS = Math.round((Date.now() - started) / 1000);
  await sys.stop();

  const out = [
    machineLine(machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`npx tsx bench/reader-nginx.ts${args.length ? ` ${args.join(' ')}` : ''}\`; load: ${wrkBin ? `wrk, 1 thread` : 'autocannon in the bench process'}, ${CONNECTIONS} keep-alive connections; per scenario 1 s warm-up each, then ${ROUNDS} rounds of ${DURATION} s per server, interleaved (order flipped every round), medians; ${measuredS} s of load in all.${nginxBin ? '' : ' **nginx not installed: comparison skipped.**'}`,
    '',
    '- reader: `oddsfiles start --roles reader` alone (the watcher+worker that published the files stopped), its requests answered on the hot path (`reader.hot_path`, the default: src/reader/hot-path.ts), `LOG_LEVEL=info` (one log line per request, to a file), the plan rate limit counted with tokens leased from Redis in blocks (the `pro` plan with a rate too high to trip), the key in `X-API-Key`.',
    '- three more reader processes on the same data show where its time goes: every request through Fastify (`reader.hot_path: false`, the reader before 2026-11-24 noon); without the request log line for successful requests (`reader.request_log: errors`, the setting for busy readers); and also without the plan rate limit (a `pro` plan without `rate`). Measured in the two scenarios with a target.',
    '- bare node:http: the same bytes from Buffers after a key lookup, nothing else, in its own process: what any single Node process can do here, the ceiling of the reader.',
    "- bare node:http + the reader's response headers: the same server sending, with each answer, the headers the reader sent with it (captured once: ETag, Cache-Control, Content-Type, the five rate-limit fields; Last-Modified, Vary and Content-Encoding on downloads), handed to `writeHead` as one flat list as the hot path does: what the contract's headers alone cost a Node server. Measured in the two scenarios with a target.",
    '- nginx: `worker_processes 1`, `daemon off`, access log on (to a file), `sendfile on`, `open_file_cache`, `keepalive_requests 10000` (as the reader\'s `maxRequestsPerSocket`), `gzip_static on` + `gzip_vary on` serving the reader\'s own gzip bytes; `/v1/files` is the reader\'s answer saved as a file. It ignores the key.',
    '',
    table(['scenario', 'server', 'req/s', 'vs nginx', 'p99 ms', 'server CPU µs per request (of which kernel)', 'target ≥ 0.5×'], rows, ['l', 'l', 'r', 'r', 'r', 'r', 'l']),
  ].join('\n');
  process.stdout.write(`\n${out}\n`);
  if (WRITE_DOC) await writeDocSection('reader-nginx', out);
}

/** A bare node:http server (bench/bare-node.ts) as one of the servers measured. */
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
    const ok = await fetch(`${base}/v1/files`).then((r) => r.ok, () => false);
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

async function load(wrkBin: string | undefined, srv: Server, s: Scenario, key: string, seconds: number): Promise<Load> {
  const pids = srv.pids();
  const split = () => pids.map(cpuSplitMs).reduce((a, c) => ({ user: a.user + c.user, system: a.system + c.system }), { user: 0, system: 0 });
  const cpu0 = split();
  const headers = { 'x-api-key': key, ...s.headers };
  let result: { rps: number; p99ms: number; mbps: number; requests: number };
  if (wrkBin) {
    const hdr = Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]);
    const r = spawnSync(wrkBin, ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', ...hdr, `${srv.base}${s.path}`], { encoding: 'utf8' });
    const text = r.stdout;
    const bad = /Non-2xx or 3xx responses: (\d+)/.exec(text);
    const errors = /Socket errors: (.*)/.exec(text);
    if (r.status !== 0 || bad || (errors && /timeout [1-9]|read [1-9]|write [1-9]|connect [1-9]/.test(errors[1]!))) {
      throw new Error(`${s.name} at ${srv.name}: wrk: ${text}${r.stderr}`);
    }
    const p99 = /99%\s+([\d.]+)(us|ms|s)\b/.exec(text);
    const unit = { us: 0.001, ms: 1, s: 1000 } as const;
    const requests = Number(/(\d+) requests in/.exec(text)?.[1]);
    const transfer = /Transfer\/sec:\s+([\d.]+)(B|KB|MB|GB)/.exec(text);
    const scale = { B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 } as const;
    result = {
      rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(text)?.[1]),
      p99ms: p99 ? Number(p99[1]) * unit[p99[2] as keyof typeof unit] : Number.NaN,
      mbps: transfer ? (Number(transfer[1]) * scale[transfer[2] as keyof typeof scale]) / 1e6 : Number.NaN,
      requests,
    };
  } else {
    const r = await autocannon({ url: `${srv.base}${s.path}`, connections: CONNECTIONS, duration: seconds, headers });
    if (r.non2xx + r.errors + r.timeouts > 0) throw new Error(`${s.name} at ${srv.name}: ${r.non2xx} non-2xx, ${r.errors} errors`);
    result = { rps: r.requests.average, p99ms: r.latency.p99, mbps: r.throughput.average / 1e6, requests: r.requests.total };
  }
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
