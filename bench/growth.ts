/**
 * Growth: how freshness and ingest throughput change with the file size (20 KB, 200 KB, 2 MB,
 * 20 MB; the example registry) and with the number of feeds (38, 380, 3,800 filenames of 20 KB;
 * a generated registry of `split` bookmakers bk0001… × sports). Few rounds per point: a curve,
 * not a precise figure.
 *
 * oddsfiles runs as `npm start` does (every role in one process). Per point, in the same run:
 * freshness of one feed (drops alone, alternating with the bare reference pipeline) and
 * throughput of rounds of many drops (alternating with the reference loop read + JSON.parse +
 * write + fsync + rename).
 */
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { EXAMPLE_FEEDS, type FixtureFeed } from '../test/fixtures/corpus.js';
import { TEST_REDIS_URL } from '../test/helpers/redis.js';
import { BareSystem } from './lib/bare/system.js';
import { benchArgs, commandLine } from './lib/common/cli.js';
import { docTemplate, generatedRegistry, MANY_SPORTS, type DocTemplate } from './lib/common/drops.js';
import { machineInfo, machineLine } from './lib/common/machine.js';
import { OddsfilesSystem } from './lib/common/oddsfiles-system.js';
import { Poller } from './lib/common/poller.js';
import { quiesce } from './lib/common/proc.js';
import { publishReport, table } from './lib/common/report.js';
import { dropAndPoll, ingestRound, referenceRound } from './lib/common/rounds.js';
import { log, runMain, tempDir } from './lib/common/run.js';
import { fmtInt, fmtMs, fmtX, median, quantile } from './lib/common/stats.js';

const args = benchArgs('Growth: freshness and throughput by file size and by number of feeds.', {
  only: { type: 'string', choices: ['size', 'feeds'], description: 'measure one of the two curves (default: both)' },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});
const only = args.only;
const QUICK = args.quick;
const WRITE_DOC = !args['no-doc'] && !QUICK;
const KB = 1024;

/** [label, bytes per drop, freshness drops, files per round, rounds]; --quick: the two smallest sizes, briefly. */
const SIZE_POINTS: readonly (readonly [string, number, number, number, number])[] = QUICK
  ? [
      ['20 KB', 20 * KB, 2, 8, 1],
      ['200 KB', 200 * KB, 2, 8, 1],
    ]
  : [
      ['20 KB', 20 * KB, 12, 38, 3],
      ['200 KB', 200 * KB, 12, 38, 3],
      ['2 MB', 2 * KB * KB, 10, 38, 2],
      ['20 MB', 20 * KB * KB, 5, 8, 1],
    ];
/** [bookmakers, sports, rounds, freshness drops]. */
const FEED_POINTS: readonly (readonly [number, number, number, number])[] = QUICK
  ? [[19, 1, 1, 2]]
  : [
      [19, 1, 3, 12],
      [19, 10, 2, 12],
      [190, 10, 1, 12],
    ];

interface Point {
  readonly label: string;
  readonly freshness: number[];
  readonly bareFreshness: number[];
  readonly rounds: { seconds: number; cpuMs: number; settled: boolean }[];
  readonly refRounds: { seconds: number; cpuMs: number }[];
  readonly dropsPerRound: number;
  readonly bytesPerDrop: number;
  note?: string;
}

/** The references every point is measured against: the bare pipeline and the reference loop. */
interface Reference {
  readonly bare: BareSystem;
  readonly barePoller: Poller;
  readonly redis: Redis;
  readonly refDir: string;
  /** The bare pipeline's current ETag per filename. */
  readonly bareEtags: Map<string, string>;
}

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const started = Date.now();
  const ref = await startReference();
  const sizePoints = only !== 'feeds' ? await bySize(ref) : [];
  const feedPoints = only !== 'size' ? await byFeeds(ref) : [];
  ref.barePoller.close();
  ref.redis.disconnect();
  const measuredS = Math.round((Date.now() - started) / 1000);
  await publishReport(only ? `growth-${only}` : 'growth', report(machine, measuredS, sizePoints, feedPoints), WRITE_DOC);
}

/** The bare pipeline, warmed up (JIT, its folders) before it serves as the reference. */
async function startReference(): Promise<Reference> {
  const bare = await BareSystem.start('growth-bare');
  const ref: Reference = {
    bare,
    barePoller: new Poller(bare.readerUrl, bare.key),
    redis: new Redis(TEST_REDIS_URL),
    refDir: await tempDir('growth-ref'),
    bareEtags: new Map<string, string>(),
  };
  const t = docTemplate(EXAMPLE_FEEDS[0]!, 200 * KB);
  for (let i = 0; i < (QUICK ? 2 : 8); i++)
    ref.bareEtags.set(t.feed.filename, (await dropAndPoll(bare, ref.barePoller, t, ref.bareEtags.get(t.feed.filename))).etag);
  return ref;
}

/** Freshness of `tmpl` on `sys`, alternating drop by drop with the bare pipeline. */
async function freshness(ref: Reference, sys: OddsfilesSystem, poller: Poller, tmpl: DocTemplate, n: number, point: Point): Promise<void> {
  let prev: string | undefined;
  // Publish once on both (the first drop of a filename also creates its folders).
  prev = (await dropAndPoll(sys, poller, tmpl, prev, 60_000)).etag;
  ref.bareEtags.set(tmpl.feed.filename, (await dropAndPoll(ref.bare, ref.barePoller, tmpl, ref.bareEtags.get(tmpl.feed.filename), 60_000)).etag);
  for (let i = 0; i < n; i++) {
    await quiesce([...sys.pids(), ...ref.bare.pids()], { maxMs: 10_000 });
    const order = i % 2 === 0 ? (['odds', 'bare'] as const) : (['bare', 'odds'] as const);
    for (const which of order) {
      if (which === 'odds') {
        const r = await dropAndPoll(sys, poller, tmpl, prev, 60_000);
        prev = r.etag;
        point.freshness.push(r.fresh);
      } else {
        const r = await dropAndPoll(ref.bare, ref.barePoller, tmpl, ref.bareEtags.get(tmpl.feed.filename), 60_000);
        ref.bareEtags.set(tmpl.feed.filename, r.etag);
        point.bareFreshness.push(r.fresh);
      }
      await sleep(30 + Math.random() * 40);
    }
  }
}

/** Throughput rounds alternating with the reference loop. */
async function throughput(
  ref: Reference,
  sys: OddsfilesSystem,
  templates: readonly DocTemplate[],
  rounds: number,
  point: Point,
  timeoutMs: number,
): Promise<void> {
  const quiet = () => [...sys.pids(), ...ref.bare.pids()];
  for (let r = 0; r < rounds; r++) {
    const first = r % 2 === 0;
    if (first) point.refRounds.push(await referenceRound(join(ref.refDir, 'r'), templates, quiet));
    point.rounds.push(await ingestRound(sys, templates, ref.redis, quiet, timeoutMs));
    if (!first) point.refRounds.push(await referenceRound(join(ref.refDir, 'r'), templates, quiet));
    log(
      `  ${point.label}: round ${r + 1}: ${fmtInt(templates.length / point.rounds.at(-1)!.seconds)} drops/s, reference ${fmtInt(templates.length / point.refRounds.at(-1)!.seconds)}/s`,
    );
  }
}

function newPoint(label: string, dropsPerRound: number, bytesPerDrop: number): Point {
  return {
    label,
    freshness: [],
    bareFreshness: [],
    rounds: [],
    refRounds: [],
    dropsPerRound,
    bytesPerDrop,
  };
}

/** Points by file size, on one `npm start` system. */
async function bySize(ref: Reference): Promise<Point[]> {
  const sizePoints: Point[] = [];
  const sys = await OddsfilesSystem.start({ label: 'growth-size', shape: 'single' });
  const poller = new Poller(sys.readerUrl!, sys.key);
  const measured = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_northwind_soccer.json')!;
  for (const [label, bytes, freshN, files, rounds] of SIZE_POINTS) {
    log(`size ${label}…`);
    const point = newPoint(label, files, bytes);
    const feeds = EXAMPLE_FEEDS.slice(0, files);
    const templates = feeds.map((f) => docTemplate(f, bytes));
    await throughput(ref, sys, templates, rounds, point, 180_000);
    await freshness(ref, sys, poller, docTemplate(measured, bytes), freshN, point);
    sizePoints.push(point);
    log(`  ${label}: freshness p50 ${fmtMs(median(point.freshness))} ms (bare ${fmtMs(median(point.bareFreshness))} ms)`);
  }
  poller.close();
  await sys.stop();
  return sizePoints;
}

/** Points by number of feeds, a system started for each. */
async function byFeeds(ref: Reference): Promise<Point[]> {
  const feedPoints: Point[] = [];
  for (const [bookmakers, sports, rounds, freshN] of FEED_POINTS) {
    const reg = generatedRegistry(bookmakers, MANY_SPORTS.slice(0, sports));
    const n = reg.feeds.length;
    log(`${n} feeds…`);
    const sys = await OddsfilesSystem.start({ label: `growth-feeds${n}`, shape: 'single', config: reg.config });
    const poller = new Poller(sys.readerUrl!, sys.key);
    const point = newPoint(`${fmtInt(n)} feeds`, n, 20 * KB);
    const templates = reg.feeds.map((f: FixtureFeed) => docTemplate(f, 20 * KB));
    // The first round publishes every feed; with few rounds it is measured too (the report says so).
    await throughput(ref, sys, templates, rounds, point, 150_000);
    await freshness(ref, sys, poller, templates[0]!, freshN, point);
    const files = await poller.get('/v1/files');
    point.note = `/v1/files ${fmtInt(files.bytes)} B`;
    feedPoints.push(point);
    log(`  ${n}: freshness p50 ${fmtMs(median(point.freshness))} ms (bare ${fmtMs(median(point.bareFreshness))} ms)`);
    poller.close();
    await sys.stop();
  }
  return feedPoints;
}

function report(machine: ReturnType<typeof machineInfo>, measuredS: number, sizePoints: Point[], feedPoints: Point[]): string {
  const rowsOf = (points: Point[]) =>
    points.map((p) => {
      const rate = p.dropsPerRound / median(p.rounds.map((r) => r.seconds));
      const refRate = p.dropsPerRound / median(p.refRounds.map((r) => r.seconds));
      const unsettled = p.rounds.filter((r) => !r.settled).length;
      return [
        p.label,
        fmtMs(median(p.freshness)),
        fmtMs(quantile(p.freshness, 0.99)),
        fmtMs(median(p.bareFreshness)),
        fmtX(median(p.freshness) / median(p.bareFreshness)),
        `${p.dropsPerRound} × ${p.rounds.length}${unsettled ? ` (${unsettled} not settled in time)` : ''}`,
        fmtInt(rate),
        ((rate * p.bytesPerDrop) / 1e6).toFixed(1),
        fmtInt(refRate),
        fmtX(rate / refRate),
        fmtMs(median(p.rounds.map((r) => r.cpuMs)) / p.dropsPerRound),
        fmtMs(median(p.refRounds.map((r) => r.cpuMs)) / p.dropsPerRound),
        p.note ?? '',
      ];
    });
  const header = [
    'point',
    'freshness p50 ms',
    'max ms',
    'bare p50 ms',
    'p50 / bare',
    'drops × rounds',
    'drops/s',
    'MB/s',
    'reference drops/s',
    'vs reference',
    'CPU ms / drop',
    'reference CPU ms / drop',
    '',
  ];
  const align = ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l'] as const;
  return [
    machineLine(machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; ${measuredS} s in all. oddsfiles as \`npm start\` runs it (one process). Freshness: drops of one feed alone, alternating drop by drop with the bare pipeline (max = the largest of few samples). Throughput: rounds of many drops renamed at once, alternating with the reference loop; medians. CPU ms / drop: all of the service's CPU for a round (until idle again: compression and manifest writes included) / drops.`,
    '',
    ...(sizePoints.length
      ? ['By file size (example registry; throughput rounds of 38 files, 8 at 20 MB):', '', table(header, rowsOf(sizePoints), align), '']
      : []),
    ...(feedPoints.length
      ? [
          'By number of feeds (20 KB files; generated registry: 19 bookmakers × 1 sport, 19 × 10, 190 × 10, `split`; throughput rounds of every feed, the first of which publishes them all):',
          '',
          table(header, rowsOf(feedPoints), align),
        ]
      : []),
  ].join('\n');
}

runMain(main);
