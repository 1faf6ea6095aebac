/**
 * The consumers' mirror (`oddsfiles mirror`, @oddsfiles/client) against one oddsfiles deployment
 * with a process per role (watcher, worker, reader):
 *
 * 1. Latency and bytes: a new version of one live file renamed into the inbox `--rate` times a
 *    second, 5 % of its prices moved each time; rename → the file replaced in the mirror's folder
 *    (seen by fs.watch here, its bytes checked), and the bytes each update cost on the wire (the
 *    patch or file as sent, and the stream's event) against the gzip file.
 * 2. Cost to the reader: `--mirrors` consumers of the client (in `--procs` child processes, no
 *    folder writes) following the 38 example files while they change `--rate` times a second:
 *    the reader's CPU and RSS, beside the same number of consumers polling each file once a
 *    second with If-None-Match, and beside no consumers at all.
 */
import { createHash } from 'node:crypto';
import { watch } from 'node:fs';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createInterface } from 'node:readline';
import { EXAMPLE_FEEDS, generateDocument, type FixtureFeed } from '../test/fixtures/corpus.js';
import { spawnTracked } from '../test/helpers/processes.js';
import { BIN, ROOT } from '../test/helpers/service.js';
import { rawGet } from './lib/bare/node.js';
import { benchArgs, commandLine } from './lib/common/cli.js';
import { machineInfo, machineLine } from './lib/common/machine.js';
import { OddsfilesSystem } from './lib/common/oddsfiles-system.js';
import { cpuMs, memOf, quiesce } from './lib/common/proc.js';
import { publishReport, table } from './lib/common/report.js';
import { log, onCleanup, runMain, tempDir } from './lib/common/run.js';
import { fmtMs, median, nowMs, quantile } from './lib/common/stats.js';

const args = benchArgs('Mirror: rename → file replaced in the mirror folder, bytes per update, and what 100 mirrors cost the reader against polling.', {
  drops: { type: 'number', default: 200, quick: 20, description: 'measured versions in the latency part' },
  rate: { type: 'number', default: 10, description: 'changes per second (both parts)' },
  kb: { type: 'number', default: 200, quick: 50, description: 'size of the measured live file, KiB' },
  mirrors: { type: 'number', default: 100, quick: 10, description: 'consumers in the cost part' },
  procs: { type: 'number', default: 2, quick: 1, description: 'child processes holding them' },
  seconds: { type: 'number', default: 20, quick: 5, description: 'seconds measured per condition in the cost part' },
  'prebuild-for': { type: 'string', description: "the reader's deltas.prebuild_for (0s: patches built only when asked; default: the config's)" },
  part: { type: 'strings', description: 'run only this part: latency or cost (repeatable; default both)' },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});
const runs = (p: string) => args.part.length === 0 || args.part.includes(p);
const PLAN = { rate: { max: 1_000_000_000, per: '1m' }, streams: 100_000 };
type Doc = { generated_at: string; events: { markets: { selections: { odds: number }[] }[] }[] };
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const etagOf = (b: Buffer) => `"${sha(b).slice(0, 32)}"`;
const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;

let clock = Date.now() - 3_600_000;
/** Versions of a feed's document, laid out by JSON.stringify(doc, null, 2): each a later generated_at and 5 % of its prices moved. */
function versionsOf(feed: FixtureFeed, targetBytes?: number) {
  const doc = JSON.parse(generateDocument(feed, targetBytes === undefined ? {} : { targetBytes }).toString('utf8')) as Doc;
  let n = 0;
  return (): Buffer => {
    n++;
    clock = Math.max(clock + 1, Date.now() - 3_600_000);
    doc.generated_at = new Date(clock).toISOString();
    let i = 0;
    for (const e of doc.events) for (const m of e.markets) for (const s of m.selections) if ((i++ + n) % 20 === 0) s.odds = Math.round(s.odds * 100 + 1) / 100;
    return Buffer.from(JSON.stringify(doc, null, 2));
  };
}

async function dropInto(inbox: string, name: string, bytes: Buffer): Promise<number> {
  const tmp = join(inbox, `.mirror-bench-${name}.tmp`);
  await writeFile(tmp, bytes);
  const t0 = nowMs();
  await rename(tmp, join(inbox, name));
  return t0;
}

async function served(base: string, key: string, name: string, etag: string): Promise<void> {
  for (const deadline = Date.now() + 20_000; Date.now() < deadline; await sleep(20)) {
    const res = await fetch(`${base}/v1/data/${name}`, { method: 'HEAD', headers: { 'x-api-key': key, 'accept-encoding': 'identity' } });
    if (res.headers.get('etag') === etag) return;
  }
  throw new Error(`${name} ${etag} not served within 20 s`);
}

async function latency(sys: OddsfilesSystem) {
  const base = sys.readerUrl!;
  const feed = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_northwind_soccer.json')!;
  const next = versionsOf(feed, args.kb * 1024);
  const dir = await tempDir('mirror-dir');
  let bytes = next();
  await dropInto(sys.inbox, feed.filename, bytes);
  await served(base, sys.key, feed.filename, etagOf(bytes));

  const lines: { event: string; via?: string; wire_bytes?: number; lag_ms?: { published: number } }[] = [];
  const mirror = spawnTracked(process.execPath, [BIN, 'mirror', '--url', base, '--json', dir], {
    env: { PATH: process.env.PATH ?? '', ODDSFILES_KEY: sys.key },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  onCleanup(async () => void mirror.kill('SIGKILL'));
  createInterface({ input: mirror.stdout }).on('line', (l) => lines.push(JSON.parse(l) as (typeof lines)[number]));
  mirror.stderr.on('data', (c: Buffer) => log(`mirror: ${c.toString().trim()}`));

  // rename → the folder holds the version: fs.watch here, the bytes checked.
  const pending = new Map<string, number>();
  const got: number[] = [];
  let skipped = 0;
  let arrived: (() => void) | undefined;
  const watcher = watch(dir, (_event, name) => {
    if (name !== feed.filename) return;
    const at = nowMs();
    void readFile(join(dir, feed.filename)).then(
      (b) => {
        const t0 = pending.get(etagOf(b));
        if (t0 === undefined) return;
        for (const [etag, t] of pending) {
          pending.delete(etag);
          if (t === t0) break;
          skipped++; // replaced in the inbox before it was claimed: never published
        }
        got.push(at - t0);
        arrived?.();
      },
      () => undefined,
    );
  });
  for (const deadline = Date.now() + 20_000; !(await readFile(join(dir, feed.filename)).catch(() => Buffer.alloc(0))).equals(bytes); await sleep(20)) {
    if (Date.now() > deadline) throw new Error('the mirror did not sync within 20 s');
  }
  const before = lines.length;
  await quiesce(sys.pids());
  const start = nowMs();
  for (let i = 0; i < args.drops; i++) {
    await sleep(Math.max(0, start + (i * 1000) / args.rate - nowMs()));
    bytes = next();
    const tmp = join(sys.inbox, `.mirror-bench.tmp`);
    await writeFile(tmp, bytes);
    pending.set(etagOf(bytes), nowMs());
    await rename(tmp, join(sys.inbox, feed.filename));
  }
  for (const deadline = Date.now() + 10_000; pending.size > 0 && Date.now() < deadline;) await new Promise<void>((r) => ((arrived = r), setTimeout(r, 200)));
  const lost = pending.size;
  watcher.close();
  mirror.kill('SIGTERM');

  const updates = lines.slice(before).filter((l) => l.event === 'update');
  const patches = updates.filter((l) => l.via === 'patch');
  const gzip = (await rawGet(`${base}/v1/data/${feed.filename}`, { 'x-api-key': sys.key, 'accept-encoding': 'gzip' })).bytes.length;
  const pos = ((await (await fetch(`${base}/v1/catalog`, { headers: { 'x-api-key': sys.key } })).json()) as { position: number }).position;
  const change = ((await (await fetch(`${base}/v1/changes?since=${pos - 1}`, { headers: { 'x-api-key': sys.key } })).json()) as { changes: unknown[] })
    .changes[0];
  const frame = Buffer.byteLength(`id: ${pos}\nevent: change\ndata: ${JSON.stringify(change)}\n\n`);
  const wire = updates.map((l) => (l.wire_bytes ?? 0) + frame);
  return {
    got,
    skipped,
    lost,
    size: bytes.length,
    gzip,
    frame,
    updates: updates.length,
    patches: patches.length,
    wire,
    lag: updates.map((l) => l.lag_ms!.published),
  };
}

interface ChildResult {
  updates: number;
  patches: number;
  wireBytes: number;
  lagMs: number[];
  requests: number;
  notModified: number;
  errors: number;
}

async function cost(sys: OddsfilesSystem) {
  const base = sys.readerUrl!;
  const readerPid = sys.reader!.pid;
  const makers = EXAMPLE_FEEDS.map((f) => ({ feed: f, next: versionsOf(f) }));
  for (const m of makers) {
    const b = m.next();
    await dropInto(sys.inbox, m.feed.filename, b);
    await served(base, sys.key, m.feed.filename, etagOf(b));
  }
  const published = makers.length;
  const results: Record<string, { cpuPct: number; rssMb: number; rssMaxMb: number; clientCpuPct: number; changes: number; r?: ChildResult }> = {};
  for (const mode of ['none', 'stream', 'poll'] as const) {
    const children =
      mode === 'none'
        ? []
        : Array.from({ length: args.procs }, (_, i) => {
            const n = Math.floor(args.mirrors / args.procs) + (i < args.mirrors % args.procs ? 1 : 0);
            const c = spawnTracked(
              process.execPath,
              [join(ROOT, 'bench/lib/mirror/clients-child.mjs'), JSON.stringify({ url: base, key: sys.key, n, mode, files: published })],
              {
                stdio: ['pipe', 'pipe', 'inherit'],
              },
            );
            onCleanup(async () => void c.kill('SIGKILL'));
            const lines = createInterface({ input: c.stdout! });
            const next = () => new Promise<string>((r) => lines.once('line', r));
            return { c, next };
          });
    await Promise.all(children.map(async (ch) => (await ch.next()) === 'ready' || Promise.reject(new Error('a child did not get ready'))));
    await quiesce([...sys.pids(), ...children.map((ch) => ch.c.pid!)], { maxMs: 10_000 });
    for (const ch of children) ch.c.stdin!.write('go\n');
    const cpu0 = cpuMs(readerPid);
    const clientCpu0 = children.reduce((s, ch) => s + cpuMs(ch.c.pid!), 0);
    let rssMax = memOf(readerPid).rss;
    const sampler = setInterval(() => (rssMax = Math.max(rssMax, memOf(readerPid).rss)), 250);
    const start = nowMs();
    let changes = 0;
    for (let i = 0; nowMs() - start < args.seconds * 1000; i++) {
      await sleep(Math.max(0, start + (i * 1000) / args.rate - nowMs()));
      const m = makers[i % makers.length]!;
      await dropInto(sys.inbox, m.feed.filename, m.next());
      changes++;
    }
    await sleep(500);
    const ms = nowMs() - start;
    const cpu = cpuMs(readerPid) - cpu0;
    const clientCpu = children.reduce((s, ch) => s + cpuMs(ch.c.pid!), 0) - clientCpu0;
    clearInterval(sampler);
    const rss = memOf(readerPid).rss;
    const rs = await Promise.all(
      children.map(async (ch) => {
        const line = ch.next();
        ch.c.stdin!.write('stop\n');
        return JSON.parse(await line) as ChildResult;
      }),
    );
    const r =
      rs.length === 0
        ? undefined
        : rs.reduce((a, b) => ({
            ...a,
            ...Object.fromEntries(
              Object.entries(b).map(([k, v]) => [
                k,
                Array.isArray(v) ? [...(a[k as keyof ChildResult] as number[]), ...v] : (a[k as keyof ChildResult] as number) + v,
              ]),
            ),
          }));
    results[mode] = { cpuPct: (cpu / ms) * 100, rssMb: rss / 2 ** 20, rssMaxMb: rssMax / 2 ** 20, clientCpuPct: (clientCpu / ms) * 100, changes, r };
    log(
      `${mode}: reader CPU ${results[mode].cpuPct.toFixed(1)} % of a core, RSS ${results[mode].rssMb.toFixed(0)} MB (max ${results[mode].rssMaxMb.toFixed(0)})`,
    );
    await sleep(1000);
  }
  return results;
}

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const sys = await OddsfilesSystem.start({
    label: 'mirror',
    shape: 'split',
    config: {
      plans: { pro: { allow: ['*'], ...PLAN } },
      ...(args['prebuild-for'] ? { deltas: { prebuild_for: args['prebuild-for'] } } : {}),
    },
  });
  const out = [
    machineLine(machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; one process per role; the machine was shared with other jobs.`,
    '',
  ];
  if (runs('latency')) {
    const l = await latency(sys);
    const pct = `${fmtMs(median(l.got))} / ${fmtMs(quantile(l.got, 0.99))} ms`;
    const perUpdate = median(l.wire);
    log(`latency: rename → file replaced p50/p99 ${pct}; ${l.patches}/${l.updates} by patch; ${kb(perUpdate)} per update against ${kb(l.gzip)} gzip`);
    out.push(
      table(
        ['rename into the inbox → file replaced in the mirror folder', 'result', 'target'],
        [
          [
            `p50 / p99 (${l.got.length} versions at ${args.rate}/s; ${l.skipped} replaced in the inbox before publication, ${l.lost} not seen)`,
            pct,
            'p50 ≤ 20 / p99 ≤ 60 ms',
          ],
          [
            `bytes per update (median: patch or file as sent + the ${l.frame} B event) against the gzip file (${kb(l.size)} file, ${kb(l.gzip)} gzip)`,
            `${kb(perUpdate)}: 1/${(l.gzip / perUpdate).toFixed(0)}`,
            '≤ 1/10',
          ],
          ['updates applied as a JSON Patch', `${l.patches} of ${l.updates}`, ''],
          ['publication → the mirror holding it (its own lag_ms, p50 / p99)', `${fmtMs(median(l.lag))} / ${fmtMs(quantile(l.lag, 0.99))} ms`, ''],
        ],
        ['l', 'r', 'l'],
      ),
      '',
    );
  }
  if (runs('cost')) {
    const c = await cost(sys);
    const row = (label: string, x: (typeof c)[string]) => [
      label,
      `${x.cpuPct.toFixed(1)} %`,
      `${x.rssMb.toFixed(0)} MB (max ${x.rssMaxMb.toFixed(0)})`,
      `${x.clientCpuPct.toFixed(0)} %`,
      x.r
        ? `${x.r.updates} updates${x.r.patches ? ` (${x.r.patches} by patch)` : ''}, ${x.r.requests ? `${x.r.requests} requests (${x.r.notModified} 304)` : `${kb(x.r.wireBytes / Math.max(1, x.r.updates))} per update`}, ${x.r.errors} errors`
        : '',
    ];
    out.push(
      table(
        [`reader, 38 files changing ${args.rate}/s for ${args.seconds} s`, 'reader CPU (of one core)', 'reader RSS', 'consumers CPU', 'what they got'],
        [
          row('no consumers', c.none!),
          row(`${args.mirrors} mirrors (@oddsfiles/client: stream + patches)`, c.stream!),
          row(`${args.mirrors} consumers polling each file once a second (If-None-Match)`, c.poll!),
        ],
        ['l', 'r', 'r', 'r', 'l'],
      ),
      '',
      `The mirrors: ${args.procs} child processes of the client library (what \`oddsfiles mirror\` runs, without writing a folder); lag from publication p50 / p99 ${fmtMs(median(c.stream!.r!.lagMs))} / ${fmtMs(quantile(c.stream!.r!.lagMs, 0.99))} ms. Conditions one after the other on the same reader.`,
    );
  }
  await sys.stop();
  await publishReport('mirror', out.join('\n'), !args['no-doc'] && !args.quick);
}

runMain(main);
