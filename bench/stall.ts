/**
 * A reader never stalls: one reader process (watcher and worker in another), a steady client
 * asking /v1/files and /healthz in turn, and one hostile pattern at a time: (a) JSON Patch deltas
 * of a 5 MB file from 8 older bases in rotation, 4 clients; (b) a 40 MB version published;
 * (c) 100 drops a second of 200 KB files; (d) 20 stalled uploads of one publisher key while
 * another key publishes. For each: the reader's event-loop delay p99 (monitorEventLoopDelay at
 * 1 ms, loaded with --import), the steady client's p99 against the idle reader's, and the
 * reader's RSS. Then the size of a one-version-behind patch against the gzip whole file (200 KB),
 * and the reader's CPU per answer of that patch against its 304.
 *
 * The parts: what is measured during a pattern (lib/stall/meter.ts), the patterns
 * (lib/stall/patterns.ts), the patch's size and CPU (lib/stall/cost.ts), the report
 * (lib/stall/report.ts); this file starts the system and runs them in order.
 */
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EXAMPLE_FEEDS, generateDocument } from '../test/fixtures/corpus.js';
import { runCli } from '../test/helpers/service.js';
import { benchArgs, commandLine } from './lib/common/cli.js';
import { docTemplate } from './lib/common/drops.js';
import { machineInfo, machineLine } from './lib/common/machine.js';
import { OddsfilesSystem } from './lib/common/oddsfiles-system.js';
import { memOf } from './lib/common/proc.js';
import { publishReport } from './lib/common/report.js';
import { log, runMain, tempDir } from './lib/common/run.js';
import { inboxOf, keepAliveGet } from './lib/stall/client.js';
import { patchCost } from './lib/stall/cost.js';
import { measureBuildFloor, type BuildFloor, type Floor } from './lib/stall/floor.js';
import { MB, memLine, startMeter, type Meter } from './lib/stall/meter.js';
import { bigVersion, deltaClients, deltaFloor, dropStorm, stalledUploads } from './lib/stall/patterns.js';
import { logReaderProfile, stallReport } from './lib/stall/report.js';
import { feedOf, versionsOf } from './lib/stall/versions.js';

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

if (!/^[abcd]+$/.test(args.only)) throw new Error(`--only takes letters of abcd (the patterns to run, e.g. ac), not ${JSON.stringify(args.only)}`);

/** The file of (a)'s deltas, and that of (b)'s big version. */
const DELTA = 'site_live_northwind_soccer.json';
const BIG = 'site_pregame_bluewater_soccer.json';

/** As the Docker image runs it (see Dockerfile): fewer malloc arenas, big blocks mapped and freed memory returned, a small young generation. */
const IMAGE_ENV = {
  MALLOC_ARENA_MAX: '2',
  NODE_OPTIONS: '--max-semi-space-size=4',
  MALLOC_MMAP_THRESHOLD_: '131072',
  MALLOC_TRIM_THRESHOLD_: '131072',
};

/** One reader (measured, with the loop probe) and watcher+worker in another process. */
function startSystem(probeDir: string): Promise<OddsfilesSystem> {
  return OddsfilesSystem.start({
    label: 'stall',
    shape: 'pair',
    nodeArgs: ['--import', resolve('bench/lib/stall/loop-probe.mjs'), ...(args['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', probeDir] : [])],
    env: { LOOP_PROBE_DIR: probeDir, ...IMAGE_ENV },
    config: { reader: { request_log: 'off' }, ingest: { concurrency: 4 } },
  });
}

/** 12 s for the reader to give memory back after a pattern: its RSS then, and its memory logged. */
async function settled(meter: Meter, pid: number, after: string): Promise<number> {
  await sleep(12_000);
  const rss = memOf(pid).rss;
  log(`12 s after ${after}: reader memory (MB): ${memLine((await meter.probe()).mem)}`);
  return rss;
}

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const probeDir = await tempDir('stall-probe');
  const sys = await startSystem(probeDir);
  const pid = sys.reader!.pid;
  const url = sys.readerUrl!;
  const otherKey = (await runCli(sys.env, ['keys', 'create', '--name', 'other-publisher', '--publish', '*'])).stdout.trim();
  const http = keepAliveGet();
  const inbox = inboxOf({ inbox: sys.inbox, url, key: sys.key, get: http.get });
  const meter = startMeter({ pid, probeDir, url, key: sys.key, get: http.get, publishedBytes: inbox.publishedBytes });

  // The 5 MB file of (a), 9 versions: the newest and the 8 bases its clients ask patches from.
  const next5 = versionsOf(DELTA, 5 * MB);
  const etags: string[] = [];
  const versions5: Buffer[] = [];
  for (let i = 0; i < 9; i++) {
    const b = next5();
    versions5.push(b);
    await inbox.drop(DELTA, b);
    etags.push(await inbox.served(DELTA, b));
  }
  await sleep(2000);
  const idle = await meter.phase('idle', async () => {
    await sleep(args.seconds * 500);
    return '';
  });

  const only = (p: string) => args.only.includes(p);
  const a = { url, pid, key: sys.key, name: DELTA, seconds: args.seconds };
  if (only('a')) await meter.phase('(a) deltas of a 5 MB file, 8 bases in rotation, 4 clients', () => deltaClients({ ...a, etags: etags.slice(0, 8) }));
  let floor: Floor | undefined;
  if (only('a')) floor = await deltaFloor({ ...a, etag: etags[0]!, get: http.get });
  let buildFloor: BuildFloor | undefined;
  if (only('a')) {
    buildFloor = await measureBuildFloor(versions5[8]!, versions5.slice(0, 8), IMAGE_ENV);
    log(`(a) memory floor: a bare process doing the same builds: ${JSON.stringify(buildFloor)}`);
  }
  const afterA = await settled(meter, pid, '(a)');

  if (only('b')) {
    // Sized in decimal MB, as --big-mb is.
    const big = generateDocument(feedOf(BIG), { targetBytes: args['big-mb'] * 1e6, generatedAt: new Date(Date.now() - 1000).toISOString() });
    await meter.phase(`(b) a ${(big.length / 1e6).toFixed(0)} MB version published`, () => bigVersion({ inbox, name: BIG, bytes: big, seconds: args.seconds }));
  }
  const afterB = await settled(meter, pid, '(b)');

  const SMALL = EXAMPLE_FEEDS.filter((f) => f.filename !== DELTA && f.filename !== BIG)
    .slice(0, 20)
    .map((f) => ({ name: f.filename, next: versionsOf(f.filename, 200_000) }));
  const templates = SMALL.map((f) => docTemplate(feedOf(f.name), 200_000));
  if (only('c')) await meter.phase('(c) 100 drops/s of 200 KB files (20 files)', () => dropStorm({ inbox, templates, seconds: args.seconds }));
  if (only('d'))
    await meter.phase('(d) 20 stalled uploads of one key while another key publishes', () =>
      stalledUploads({ url, stalledKey: sys.publisherKey, stalledName: SMALL[0]!.name, otherKey, other: SMALL[1]!, seconds: args.seconds }),
    );

  const live = SMALL.find((f) => f.name.startsWith('site_live_'))!;
  const cost = await patchCost({ url, pid, key: sys.key, get: http.get, inbox, name: live.name, next: live.next, requests: args.requests });
  await meter.stop();
  http.close();
  await sys.stop();
  if (args['cpu-prof']) await logReaderProfile(probeDir, pid, meter.spans);

  const out = stallReport({
    machine,
    command: commandLine(args),
    seconds: args.seconds,
    rows: meter.rows,
    idleSteadyP99: idle.steadyP99,
    floor,
    buildFloor,
    afterA,
    afterB,
    cost,
    requests: args.requests,
  });
  await publishReport('stall', out, !args['no-doc'] && !args.quick);
}

runMain(main);
