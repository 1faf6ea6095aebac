/**
 * A reader never stalls: one reader process (watcher and worker in another), a steady client
 * asking /v1/files and /healthz in turn, and one hostile pattern at a time: (a) JSON Patch deltas
 * of a 5 MB file from 8 older bases in rotation, 4 clients; (b) a 40 MB version published;
 * (c) 100 drops a second of 200 KB files; (d) 20 stalled uploads of one publisher key while
 * another key publishes. For each: the reader's event-loop delay p99 (monitorEventLoopDelay at
 * 1 ms, loaded with --import), the steady client's p99 against the idle reader's, and the
 * reader's RSS. Then the size of a one-version-behind patch against the gzip whole file (200 KB),
 * and the reader's CPU per answer of that patch against its 304.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join, resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { EXAMPLE_FEEDS, generateDocument } from '../test/fixtures/corpus.js';
import { runCli } from '../test/helpers/service.js';
import { benchArgs, commandLine } from './lib/cli.js';
import { docTemplate, version } from './lib/drops.js';
import { machineInfo, machineLine } from './lib/machine.js';
import { OddsfilesSystem } from './lib/oddsfiles-system.js';
import { cpuMs, loopCpuMs, memOf } from './lib/proc.js';
import { summarizeProfile } from './lib/profile.js';
import { publishReport, table } from './lib/report.js';
import { measureFloor, type Floor } from './lib/stall-floor.js';
import { log, runMain, tempDir } from './lib/run.js';
import { quantile } from './lib/stats.js';

const args = benchArgs('A reader never stalls: event-loop delay, a steady client and RSS under hostile patterns.', {
  seconds: { type: 'number', default: 20, quick: 6, description: 'length of each pattern, s' },
  'big-mb': { type: 'number', default: 40, quick: 12, description: 'size of the big version of (b), MB' },
  requests: { type: 'number', default: 3000, quick: 500, description: 'requests per kind in the CPU comparison' },
  only: { type: 'string', default: 'abcd', description: 'the patterns to run, e.g. `c`' },
  'cpu-prof': {
    type: 'boolean',
    description: 'write V8 CPU profiles of the processes (kept with BENCH_KEEP=1) and print where the reader spent its time, in all and in each pattern',
  },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});

type Doc = { generated_at: string; events: { markets: { selections: { odds: number }[] }[] }[] };
const MB = 2 ** 20;
const agent = new Agent({ keepAlive: true, maxSockets: 16 });

/** A GET over keep-alive that reads the body as sent (no decoding: fetch's gunzip would cost this process CPU the reader needs). */
function get(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; length: number }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, headers }, (res) => {
      let length = 0;
      res.on('data', (c: Buffer) => (length += c.length));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, length }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}
const feedOf = (name: string) => EXAMPLE_FEEDS.find((f) => f.filename === name)!;

/** Successive versions of one file of about `bytes` (as written here): every 20th price moved from the previous version. */
function versionsOf(name: string, bytes: number): () => Buffer {
  const first = (target: number) => JSON.parse(generateDocument(feedOf(name), { targetBytes: target }).toString()) as Doc;
  let doc = first(bytes);
  doc = first(Math.round((bytes * bytes) / Buffer.byteLength(JSON.stringify(doc, null, 1))));
  let n = 0;
  return () => {
    doc.generated_at = new Date(Date.now() - 1000).toISOString();
    let i = n++;
    for (const e of doc.events) for (const m of e.markets) for (const s of m.selections) if (i++ % 20 === 0) s.odds = Math.round(s.odds * 100 + 7) / 100;
    return Buffer.from(JSON.stringify(doc, null, 1));
  };
}

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const probeDir = await tempDir('stall-probe');
  const sys = await OddsfilesSystem.start({
    label: 'stall',
    shape: 'pair',
    nodeArgs: ['--import', resolve('bench/lib/loop-probe.mjs'), ...(args['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', probeDir] : [])],
    // As the Docker image runs it (see Dockerfile): fewer malloc arenas, big blocks mapped and freed memory returned, a small young generation.
    env: {
      LOOP_PROBE_DIR: probeDir,
      MALLOC_ARENA_MAX: '2',
      NODE_OPTIONS: '--max-semi-space-size=4',
      MALLOC_MMAP_THRESHOLD_: '131072',
      MALLOC_TRIM_THRESHOLD_: '131072',
    },
    config: { reader: { request_log: 'off' }, ingest: { concurrency: 4 } },
  });
  const reader = sys.reader!;
  const url = sys.readerUrl!;
  const other = await runCli(sys.env, ['keys', 'create', '--name', 'other-publisher', '--publish', '*']);
  const otherKey = other.stdout.trim();

  // --- measuring ----------------------------------------------------------------------------
  type Probe = { p99: number; max: number; atUs: number; mem?: Record<string, number>; gc?: { count: number; totalMs: number; maxMs: number; major: number } };
  const loop = async (): Promise<Probe> => {
    const path = join(probeDir, `loop-${reader.pid}.json`);
    const before = await readFile(path, 'utf8').catch(() => '{"n":-1}');
    process.kill(reader.pid, 'SIGUSR2');
    for (;;) {
      await sleep(20);
      const now = await readFile(path, 'utf8').catch(() => before);
      if (now !== before && now.length > 0) return JSON.parse(now) as Probe;
    }
  };
  let steady: number[] = [];
  let steadyErrors = 0;
  let stopSteady = false;
  const steadyClient = (async () => {
    while (!stopSteady) {
      for (const path of ['/v1/files', '/healthz']) {
        const t = performance.now();
        try {
          const res = await get(`${url}${path}`, { 'x-api-key': sys.key });
          if (res.status !== 200) steadyErrors++;
        } catch {
          steadyErrors++;
        }
        steady.push(performance.now() - t);
      }
      await sleep(10);
    }
  })();
  let rssPeak = 0;
  const rssTimer = setInterval(() => (rssPeak = Math.max(rssPeak, memOf(reader.pid).rss)), 100);
  const published = new Map<string, number>();
  const inbox = sys.inbox;
  const drop = async (name: string, bytes: Buffer) => {
    const tmp = join(inbox, `.${name}.${randomBytes(3).toString('hex')}.tmp`);
    await writeFile(tmp, bytes);
    await rename(tmp, join(inbox, name));
    published.set(name, bytes.length);
  };
  const etagOf = async (bytes: Buffer) => `"${(await import('node:crypto')).createHash('sha256').update(bytes).digest('hex').slice(0, 32)}"`;
  const served = async (name: string, bytes: Buffer) => {
    const etag = await etagOf(bytes);
    for (;;) {
      const res = await get(`${url}/v1/data/${name}`, { 'x-api-key': sys.key, 'if-none-match': etag, 'accept-encoding': 'gzip' });
      if (res.status === 304) return etag;
      await sleep(50);
    }
  };
  const publishedBytes = () => [...published.values()].reduce((a, b) => a + b, 0);

  const rows: string[][] = [];
  /** Each pattern's span on the reader's profile clock. */
  const spans: { label: string; fromUs: number; toUs: number }[] = [];
  /** The reader's memory as process.memoryUsage() tells it, MB. */
  const memLine = (m: Record<string, number> | undefined) =>
    m === undefined ? '' : ['rss', 'heapTotal', 'heapUsed', 'external', 'arrayBuffers'].map((k) => `${k} ${((m[k] ?? 0) / MB).toFixed(0)}`).join(', ');
  const phase = async (label: string, run: () => Promise<string>) => {
    const first = await loop(); // reset
    const fromUs = first.atUs;
    log(`${label}: reader memory before (MB): ${memLine(first.mem)}`);
    steady = [];
    steadyErrors = 0;
    rssPeak = memOf(reader.pid).rss;
    const own = monitorEventLoopDelay({ resolution: 1 });
    own.enable();
    const note = await run();
    own.disable();
    log(`${label}: this process's loop delay p99 ${(own.percentile(99) / 1e6).toFixed(1)} ms`);
    const l = await loop();
    spans.push({ label, fromUs, toUs: l.atUs });
    const p99 = quantile(steady, 0.99);
    rows.push([
      label,
      `${l.p99.toFixed(1)} ms (max ${l.max.toFixed(0)})`,
      l.gc ? `${l.gc.count} (${l.gc.major} major): ${l.gc.totalMs.toFixed(0)} ms, longest ${l.gc.maxMs.toFixed(1)}` : '',
      `${p99.toFixed(1)} ms`,
      `${(rssPeak / MB).toFixed(0)} MB`,
      `${(publishedBytes() / MB).toFixed(1)} MB`,
      note,
    ]);
    log(`${label}: reader memory after (MB): ${memLine(l.mem)}`);
    log(
      `${label}: loop p99 ${l.p99.toFixed(1)} ms, steady p99 ${p99.toFixed(1)} ms (${steadyErrors} errors), RSS peak ${(rssPeak / MB).toFixed(0)} MB; ${note}`,
    );
    return { loopP99: l.p99, steadyP99: p99 };
  };

  // --- the runs -----------------------------------------------------------------------------
  const DELTA = 'site_live_northwind_soccer.json';
  const next5 = versionsOf(DELTA, 5 * MB);
  const etags: string[] = [];
  for (let i = 0; i < 9; i++) {
    const b = next5();
    await drop(DELTA, b);
    etags.push(await served(DELTA, b));
  }
  await sleep(2000);
  const idle = await phase('idle', async () => {
    await sleep(args.seconds * 500);
    return '';
  });

  if (args.only.includes('a'))
    await phase('(a) deltas of a 5 MB file, 8 bases in rotation, 4 clients', async () => {
      // In a process of their own: in this one their answers would delay the steady client's.
      const child = spawn(process.execPath, [
        resolve('bench/lib/delta-clients-child.mjs'),
        JSON.stringify({ url, key: sys.key, name: DELTA, etags: etags.slice(0, 8), clients: 4, seconds: args.seconds }),
      ]);
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const cpuBefore = loopCpuMs(reader.pid);
      await once(child, 'exit');
      const cpu = loopCpuMs(reader.pid) - cpuBefore;
      const counts = Object.entries(JSON.parse(out) as Record<string, number>);
      const answers = counts.reduce((a, [, n]) => a + n, 0);
      return `${counts.map(([s, n]) => `${n}× ${s}`).join(', ')}; reader loop CPU ${(cpu / answers).toFixed(3)} ms per answer`;
    });
  let floor: Floor | undefined;
  if (args.only.includes('a')) {
    // The floor of (a): the sizes the reader answered with, from a bare server (stall-floor.ts).
    const patchBytes = (
      await get(`${url}/v1/data/${DELTA}`, { 'x-api-key': sys.key, 'a-im': 'json-patch', 'if-none-match': etags[0]!, 'accept-encoding': 'gzip' })
    ).length;
    const filesBytes = (await get(`${url}/v1/files`, { 'x-api-key': sys.key })).length;
    floor = await measureFloor({ seconds: args.seconds, patchBytes, filesBytes, get });
    log(
      `(a) floor: a bare node:http server, steady p99 idle ${floor.idleP99.toFixed(1)} ms, under the 4 delta clients ${floor.loadedP99.toFixed(1)} ms (${JSON.stringify(floor.counts)})`,
    );
  }
  await sleep(12_000);
  const afterA = memOf(reader.pid).rss;
  log(`12 s after (a): reader memory (MB): ${memLine((await loop()).mem)}`);

  const BIG = 'site_pregame_bluewater_soccer.json';
  const big = generateDocument(feedOf(BIG), { targetBytes: args['big-mb'] * 1e6, generatedAt: new Date(Date.now() - 1000).toISOString() });
  if (args.only.includes('b'))
    await phase(`(b) a ${(big.length / MB).toFixed(0)} MB version published`, async () => {
      const t = performance.now();
      await drop(BIG, big);
      await served(BIG, big);
      const took = performance.now() - t;
      await sleep(Math.max(0, args.seconds * 500 - took));
      return `drop → served in ${(took / 1000).toFixed(1)} s`;
    });
  await sleep(12_000);
  const afterB = memOf(reader.pid).rss;
  log(`12 s after (b): reader memory (MB): ${memLine((await loop()).mem)}`);

  const SMALL = EXAMPLE_FEEDS.filter((f) => f.filename !== DELTA && f.filename !== BIG)
    .slice(0, 20)
    .map((f) => ({ name: f.filename, next: versionsOf(f.filename, 200_000) }));
  // (c) drops templates with a new generated_at each (bench/lib/drops.ts): no JSON work in this process.
  const templates = SMALL.map((f) => docTemplate(feedOf(f.name), 200_000));
  if (args.only.includes('c'))
    await phase('(c) 100 drops/s of 200 KB files (20 files)', async () => {
      const end = Date.now() + args.seconds * 1000;
      let n = 0;
      const start = Date.now();
      while (Date.now() < end) {
        const t = templates[n % templates.length]!;
        await drop(t.feed.filename, version(t).bytes);
        n++;
        const ahead = start + n * 10 - Date.now();
        if (ahead > 0) await sleep(ahead);
      }
      return `${n} drops in ${((Date.now() - start) / 1000).toFixed(0)} s`;
    });

  if (args.only.includes('d'))
    await phase('(d) 20 stalled uploads of one key while another key publishes', async () => {
      const u = new URL(url);
      const sockets: Socket[] = [];
      const refused = { stalled: 0 };
      for (let i = 0; i < 20; i++) {
        const s = connect(Number(u.port), u.hostname);
        s.on('data', (d) => {
          if (d.toString().startsWith('HTTP/1.1 429')) refused.stalled++;
        });
        s.on('error', () => undefined);
        s.write(`PUT /v1/data/${SMALL[0]!.name} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${sys.publisherKey}\r\nContent-Length: 200000\r\n\r\n{"events":[`);
        sockets.push(s);
      }
      const outcomes = new Map<number, number>();
      const end = Date.now() + args.seconds * 1000;
      const f = SMALL[1]!;
      while (Date.now() < end) {
        const res = await fetch(`${url}/v1/data/${f.name}`, { method: 'PUT', headers: { 'x-api-key': otherKey }, body: f.next() });
        await res.arrayBuffer();
        outcomes.set(res.status, (outcomes.get(res.status) ?? 0) + 1);
        await sleep(100);
      }
      for (const s of sockets) s.destroy();
      return `stalled key: ${refused.stalled} of 20 refused 429; other key: ${[...outcomes].map(([s, n]) => `${n}× ${s}`).join(', ')}`;
    });

  // --- size goal and CPU: one version behind against 304 -----------------------------------
  const LIVE = SMALL.find((f) => f.name.startsWith('site_live_'))!;
  const v1 = LIVE.next();
  await drop(LIVE.name, v1);
  const e1 = await served(LIVE.name, v1);
  const v2 = LIVE.next();
  await drop(LIVE.name, v2);
  const e2 = await served(LIVE.name, v2);
  const ask = (etag: string) =>
    get(`${url}/v1/data/${LIVE.name}`, { 'x-api-key': sys.key, 'a-im': 'json-patch', 'if-none-match': etag, 'accept-encoding': 'gzip' });
  let patch = 0;
  for (let i = 0; i < 50 && patch === 0; i++) {
    const res = await ask(e1);
    if (res.status === 226 && res.headers['content-encoding'] === 'gzip') patch = res.length;
    else await sleep(100);
  }
  const wholeGzip = (await get(`${url}/v1/data/${LIVE.name}`, { 'x-api-key': sys.key, 'accept-encoding': 'gzip' })).length;
  const cpuOf = async (etag: string, expect: number) => {
    const before = cpuMs(reader.pid);
    for (let i = 0; i < args.requests; i++) {
      const res = await ask(etag);
      if (res.status !== expect) throw new Error(`expected ${expect}, got ${res.status}`);
    }
    return (cpuMs(reader.pid) - before) / args.requests;
  };
  const cpu = { patch: 0, notModified: 0 };
  for (let r = 0; r < 2; r++) {
    cpu.notModified += await cpuOf(e2, 304);
    cpu.patch += await cpuOf(e1, 226);
  }
  stopSteady = true;
  await steadyClient;
  clearInterval(rssTimer);
  agent.destroy();
  await sys.stop();
  if (args['cpu-prof']) {
    const file = (await readdir(probeDir)).find((f) => f.endsWith('.cpuprofile') && f.includes(`.${reader.pid}.`));
    if (file) {
      for (const span of [undefined, ...spans]) {
        const p = summarizeProfile(join(probeDir, file), 25, span);
        log(`reader profile${span ? ` of ${span.label}` : ''}: busy ${p.busyMs.toFixed(0)} ms`);
        for (const [name, ms] of [...p.groups, ...p.functions]) log(`  ${ms.toFixed(0).padStart(6)} ms  ${name}`);
      }
    }
  }

  const out = [
    machineLine(machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; the machine was shared with other work. Processes: watcher+worker, and the reader (measured) with \`deltas\` at their defaults (8 MiB, 1 s, 1 thread), both with the Docker image's \`MALLOC_ARENA_MAX=2\`, \`MALLOC_MMAP_THRESHOLD_\` and \`MALLOC_TRIM_THRESHOLD_=131072\` and \`--max-semi-space-size=4\`. Each pattern runs ${args.seconds} s (the idle reader and (b) half that); loop delay is the reader's own (monitorEventLoopDelay, 1 ms resolution); the steady client asks /v1/files and /healthz in turn, 10 ms apart.`,
    '',
    table(
      [
        'pattern',
        'reader loop delay p99 (≤ 20 ms)',
        'reader GC pauses: count, total, longest',
        `steady client p99 (≤ 2× idle: ${(2 * idle.steadyP99).toFixed(1)} ms)`,
        'reader RSS peak',
        'published',
        'outcome',
      ],
      rows,
      ['l', 'r', 'r', 'r', 'r', 'r', 'l'],
    ),
    '',
    ...(floor
      ? [
          `The floor of (a): the same steady client and the same 4 delta clients against a bare node:http server answering bytes made in advance, of the sizes the reader sent: steady client p99 ${floor.idleP99.toFixed(1)} ms idle, ${floor.loadedP99.toFixed(1)} ms under the clients (${Object.entries(
            floor.counts,
          )
            .map(([s, n]) => `${n}× ${s}`)
            .join(', ')}): ${(floor.loadedP99 / floor.idleP99).toFixed(1)}× its idle p99.`,
          '',
        ]
      : []),
    `Reader RSS 12 s after (a): ${(afterA / MB).toFixed(0)} MB; after (b): ${(afterB / MB).toFixed(0)} MB (goal during them: ≤ 100 MB + 3× the published bytes).`,
    '',
    `One version behind, ${(v2.length / 1000).toFixed(0)} KB live file, 5 % of the prices moved: JSON Patch (gzip) ${patch} bytes against the gzip whole file ${wholeGzip} bytes: 1/${(wholeGzip / Math.max(1, patch)).toFixed(0)} (goal ≤ 1/20). Reader CPU per answer over ${2 * args.requests} requests each: the patch (226) ${(cpu.patch / 2).toFixed(3)} ms, its 304 ${(cpu.notModified / 2).toFixed(3)} ms: ${(cpu.patch / cpu.notModified).toFixed(2)}× (goal ≤ 1.5×).`,
  ].join('\n');
  await publishReport('stall', out, !args['no-doc'] && !args.quick);
}

runMain(main);
