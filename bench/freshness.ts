/**
 * Freshness: from the rename of a drop into the inbox to the first GET /v1/data/{filename} that
 * returns the new version (a tight keep-alive poll with If-None-Match; the new version is
 * recognised by its ETag), alone and while the other 37 feeds are dropped in the background.
 *
 * Systems, started side by side and measured in interleaved blocks (order shuffled per block):
 * oddsfiles in one process (`npm start`); oddsfiles with one process per role (the compose shape);
 * optionally a variant of the latter with another concurrency or environment (an A/B within one
 * run); with `--baseline`, both shapes again from another build (a before/after in one run); and
 * the bare reference pipeline, which every ratio is taken against. Each oddsfiles drop
 * is broken into stages from the worker's log line (timings, jobId), the BullMQ job (receivedAt,
 * processedOn), an announcement subscriber of our own and the poller's clock. Then the watcher
 * stage alone, on the same renames: fs.watch as the service uses it, against chokidar with and
 * without awaitWriteFinish.
 *
 * With --put: from the start of a PUT /v1/data of the new version (a publisher key) to the first
 * GET that returns it, on the oddsfiles systems only.
 *
 * The parts: the systems (lib/freshness/targets.ts), the measured drops and the watcher stage
 * (lib/freshness/measure.ts), the stages of a drop (lib/freshness/stages.ts) and the report
 * (lib/freshness/report.ts); this file runs them in order.
 */
import { EXAMPLE_FEEDS } from '../test/fixtures/corpus.js';
import { benchArgs, commandLine, envOf } from './lib/common/cli.js';
import { Dropper } from './lib/common/dropper.js';
import { docTemplate } from './lib/common/drops.js';
import { measureFreshness, measureWatchers, warmUp, type Condition, type FreshnessPlan } from './lib/freshness/measure.js';
import { breakdownTable, freshnessReport, freshnessTable, slowestTable, watcherTable } from './lib/freshness/report.js';
import { startTargets, subscribeAnnouncements, type TargetOptions } from './lib/freshness/targets.js';
import { machineInfo, machineLine } from './lib/common/machine.js';
import { builtEntry } from './lib/common/oddsfiles-system.js';
import { quiesce } from './lib/common/proc.js';
import { publishReport } from './lib/common/report.js';
import { log, runMain } from './lib/common/run.js';

const args = benchArgs('Freshness: rename of a drop → first GET that returns it, against a bare pipeline of the same architecture.', {
  drops: { type: 'number', default: 40, quick: 2, description: 'measured drops per system and condition' },
  block: { type: 'number', default: 10, quick: 2, description: 'drops per interleaved block' },
  rate: { type: 'number', default: 100, quick: 20, description: 'background drops per second in the loaded condition' },
  kb: { type: 'number', default: 200, quick: 20, description: 'size of every drop, KiB' },
  conditions: { type: 'string', default: 'alone,loaded', description: 'comma-separated: alone, loaded' },
  'poll-gap-ms': {
    type: 'number',
    default: 0,
    description: "pause between two polls (0: back to back, the strictest measure; the poller's own load then competes)",
  },
  'watch-drops': {
    type: 'number',
    default: 25,
    quick: 3,
    description: 'spaced drops per watcher in the watcher-stage part (quick re-drops: four times as many)',
  },
  store: {
    type: 'string',
    default: 'fs',
    choices: ['fs', 's3'],
    description: 'where the oddsfiles systems publish (s3: an s3rver started here); the bare reference stays on the filesystem',
  },
  'carry-max-bytes': { type: 'number', description: "ingest.carry_max_bytes of the oddsfiles systems (default: the service's own; 0 turns carrying off)" },
  concurrency: { type: 'number', description: "ingest.concurrency of the oddsfiles systems (default: the service's own)" },
  env: { type: 'strings', description: 'NAME=VALUE in the environment of the oddsfiles processes (e.g. UV_THREADPOOL_SIZE=8)' },
  'variant-concurrency': { type: 'number', description: 'adds a system, one process per role, with this ingest.concurrency' },
  'variant-env': { type: 'strings', description: 'adds a system, one process per role, with NAME=VALUE in its environment' },
  'variant-carry-max-bytes': { type: 'number', description: 'adds a system, one process per role, with this ingest.carry_max_bytes (0: carrying off)' },
  'variant-validate-threads': {
    type: 'number',
    description: 'adds a system, one process per role, with this ingest.validate_threads (the worker checks drops on that many threads)',
  },
  baseline: {
    type: 'string',
    description:
      'a checkout of another build (its dist/bin/oddsfiles.js, or dist/workers/oddsfiles.js in builds before bin/): both oddsfiles shapes run from it too, in the same blocks (an A/B of a change)',
  },
  put: {
    type: 'boolean',
    description:
      'measure PUT /v1/data (a publisher key) → first GET serving the new version instead of the rename; oddsfiles systems only (the bare reference takes no PUT), no watcher stage',
  },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});
const CONDITIONS = args.conditions.split(',') as Condition[];
if (CONDITIONS.some((c) => c !== 'alone' && c !== 'loaded')) throw new Error(`--conditions takes alone and/or loaded, not ${args.conditions}`);
const MEASURED = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_northwind_soccer.json')!;
const OTHERS = EXAMPLE_FEEDS.filter((f) => f !== MEASURED);
const PLAN: FreshnessPlan = {
  put: args.put === true,
  conditions: CONDITIONS,
  drops: args.drops,
  block: args.block,
  rate: args.rate,
  kb: args.kb,
  pollGapMs: args['poll-gap-ms'],
  watchDrops: args['watch-drops'],
  measured: MEASURED.filename,
  others: OTHERS.length,
};
const SYSTEMS: TargetOptions = {
  store: args.store,
  concurrency: args.concurrency,
  carryMaxBytes: args['carry-max-bytes'],
  env: envOf(args.env),
  variant: {
    concurrency: args['variant-concurrency'],
    carryMaxBytes: args['variant-carry-max-bytes'],
    validateThreads: args['variant-validate-threads'],
    env: envOf(args['variant-env'], 'variant-env'),
  },
  baseline: args.baseline === undefined ? undefined : builtEntry(args.baseline),
  put: PLAN.put,
};

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const template = docTemplate(MEASURED, PLAN.kb * 1024);
  log(`measured feed ${MEASURED.filename}, ${template.bytes.length} bytes; ${PLAN.drops} drops per system and condition in blocks of ${PLAN.block}`);

  log('starting the systems…');
  const targets = await startTargets(SYSTEMS);
  const { announced, sub } = await subscribeAnnouncements(targets);
  const dropper = await Dropper.start(OTHERS, PLAN.kb * 1024);
  const allPids = () => [...targets.flatMap((t) => t.sys.pids()), dropper.pid];

  await warmUp(targets, template, PLAN);
  await quiesce(allPids());

  const started = Date.now();
  const { samples, backlog } = await measureFreshness({ targets, template, dropper, announced, allPids }, PLAN);
  const measuredS = Math.round((Date.now() - started) / 1000);
  sub.disconnect();
  for (const t of targets) t.poller.close();
  for (const t of targets) await t.sys.stop();

  log('watcher stage alone…');
  const watch = await measureWatchers(template, PLAN);
  const tables = {
    fresh: freshnessTable(targets, samples, backlog, PLAN),
    breakdown: breakdownTable(targets, samples, PLAN),
    slow: slowestTable(targets, samples, PLAN),
    watchers: watcherTable(watch.spaced, watch.quick, PLAN),
  };
  const out = freshnessReport({ machine, command: commandLine(args), template, measuredS, tables }, PLAN);
  await publishReport(PLAN.put ? 'freshness-put' : 'freshness', out, !args['no-doc'] && !args.quick);
}

runMain(main);
