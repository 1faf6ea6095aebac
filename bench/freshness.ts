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
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { EXAMPLE_FEEDS } from '../test/fixtures/corpus.js';
import { TEST_REDIS_URL } from '../test/helpers/redis.js';
import { startS3rver } from '../test/helpers/s3rver.js';
import { BareSystem } from './lib/bare-system.js';
import { benchArgs, commandLine, envOf } from './lib/cli.js';
import { Dropper } from './lib/dropper.js';
import { docTemplate, type DocTemplate } from './lib/drops.js';
import { machineInfo, machineLine } from './lib/machine.js';
import { builtEntry, OddsfilesSystem } from './lib/oddsfiles-system.js';
import { Poller } from './lib/poller.js';
import { quiesce } from './lib/proc.js';
import { publishReport, table } from './lib/report.js';
import { dropAndPoll, putAndPoll, waitDrained, type System } from './lib/rounds.js';
import { log, onCleanup, runMain } from './lib/run.js';
import { WATCHERS, watcherStage, type WatcherName } from './lib/watcher-stage.js';
import { bareStages, breakdown, STAGES, type Sample } from './lib/freshness-stages.js';
import { fmtMs, fmtX, median, nowMs, quantile, shuffle } from './lib/stats.js';

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
const PUT = args.put === true;
const DROPS = args.drops;
const BLOCK = args.block;
const RATE = args.rate;
const KB = args.kb;
const CONDITIONS = args.conditions.split(',') as Condition[];
if (CONDITIONS.some((c) => c !== 'alone' && c !== 'loaded')) throw new Error(`--conditions takes alone and/or loaded, not ${args.conditions}`);
const WRITE_DOC = !args['no-doc'] && !args.quick;
const POLL_GAP_MS = args['poll-gap-ms'];
const WATCH_DROPS = args['watch-drops'];
const CARRY_MAX_BYTES = args['carry-max-bytes'];
const CONCURRENCY = args.concurrency;
const INGEST_CONFIG = {
  ...(CARRY_MAX_BYTES === undefined ? {} : { carry_max_bytes: CARRY_MAX_BYTES }),
  ...(CONCURRENCY === undefined ? {} : { concurrency: CONCURRENCY }),
};
const SYSTEM_CONFIG = Object.keys(INGEST_CONFIG).length === 0 ? undefined : { ingest: INGEST_CONFIG };
const EXTRA_ENV = envOf(args.env);
const VARIANT_CONCURRENCY = args['variant-concurrency'];
const VARIANT_ENV = envOf(args['variant-env'], 'variant-env');
const VARIANT_CARRY = args['variant-carry-max-bytes'];
const VARIANT = VARIANT_CONCURRENCY !== undefined || VARIANT_CARRY !== undefined || Object.keys(VARIANT_ENV).length > 0;
const STORE = args.store;
const BASELINE = args.baseline === undefined ? undefined : builtEntry(args.baseline);
const MEASURED = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_northwind_soccer.json')!;
const OTHERS = EXAMPLE_FEEDS.filter((f) => f !== MEASURED);

type Condition = 'alone' | 'loaded';

interface Target {
  readonly name: string;
  readonly sys: System;
  readonly poller: Poller;
  etag: string | undefined;
}

type WatchResults = Record<WatcherName, { latency: number[]; missed: number }>;

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const template = docTemplate(MEASURED, KB * 1024);
  log(`measured feed ${MEASURED.filename}, ${template.bytes.length} bytes; ${DROPS} drops per system and condition in blocks of ${BLOCK}`);

  log('starting the systems…');
  const targets = await startTargets();
  const { announced, sub } = await subscribeAnnouncements(targets);
  const dropper = await Dropper.start(OTHERS, KB * 1024);
  const allPids = () => [...targets.flatMap((t) => t.sys.pids()), dropper.pid];

  // Publish the measured feed once everywhere (and warm up every path).
  for (const t of targets) {
    for (let i = 0; i < 3; i++) await measureOne(t, template, 'alone');
  }
  await quiesce(allPids());

  const started = Date.now();
  const { samples, backlog } = await measureFreshness(targets, template, dropper, announced, allPids);
  const measuredS = Math.round((Date.now() - started) / 1000);
  sub.disconnect();
  for (const t of targets) t.poller.close();
  for (const t of targets) await t.sys.stop();

  log('watcher stage alone…');
  const watch = await measureWatchers(template);
  const out = report(machine, template, measuredS, {
    fresh: freshnessTable(targets, samples, backlog),
    breakdown: breakdownTable(targets, samples),
    slow: slowestTable(targets, samples),
    watchers: watcherTable(watch.spaced, watch.quick),
  });
  await publishReport(PUT ? 'freshness-put' : 'freshness', out, WRITE_DOC);
}

/** The systems compared: oddsfiles in one process and with a process per role, the variant, the bare pipeline. */
async function startTargets(): Promise<Target[]> {
  const targets: Target[] = [];
  const s3 = STORE === 's3' ? await startS3rver() : undefined;
  if (s3) onCleanup(() => s3.stop());
  /** Each system under its own prefix of the one bucket. */
  const storeEnv = (label: string) => (s3 ? { ...s3.env, STORE_URL: `s3://${s3.bucket}/${label}` } : undefined);
  const systemOptions = (label: string) => ({ ...(SYSTEM_CONFIG ? { config: SYSTEM_CONFIG } : {}), env: { ...(s3 ? storeEnv(label) : {}), ...EXTRA_ENV } });
  const single = await OddsfilesSystem.start({ label: 'fresh-single', shape: 'single', ...systemOptions('fresh-single') });
  const split = await OddsfilesSystem.start({ label: 'fresh-split', shape: 'split', ...systemOptions('fresh-split') });
  const variant = VARIANT
    ? await OddsfilesSystem.start({
        label: 'fresh-variant',
        shape: 'split',
        config: {
          ...SYSTEM_CONFIG,
          ingest: {
            ...SYSTEM_CONFIG?.ingest,
            ...(VARIANT_CONCURRENCY === undefined ? {} : { concurrency: VARIANT_CONCURRENCY }),
            ...(VARIANT_CARRY === undefined ? {} : { carry_max_bytes: VARIANT_CARRY }),
          },
        },
        env: { ...(s3 ? storeEnv('fresh-variant') : {}), ...EXTRA_ENV, ...VARIANT_ENV },
      })
    : undefined;
  const variantName = `oddsfiles (process per role, ${[
    ...(VARIANT_CONCURRENCY === undefined ? [] : [`concurrency ${VARIANT_CONCURRENCY}`]),
    ...(VARIANT_CARRY === undefined ? [] : [`carry_max_bytes ${VARIANT_CARRY}`]),
    ...Object.entries(VARIANT_ENV).map(([k, v]) => `${k}=${v}`),
  ].join(', ')})`;
  const baseline = BASELINE
    ? ([
        [
          'oddsfiles (one process), baseline',
          await OddsfilesSystem.start({ label: 'fresh-base-single', shape: 'single', bin: BASELINE, ...systemOptions('fresh-base-single') }),
        ],
        [
          'oddsfiles (process per role), baseline',
          await OddsfilesSystem.start({ label: 'fresh-base-split', shape: 'split', bin: BASELINE, ...systemOptions('fresh-base-split') }),
        ],
      ] as const)
    : [];
  const bare = PUT ? undefined : await BareSystem.start('fresh-bare');
  for (const [name, sys] of [
    ['oddsfiles (one process)', single],
    ['oddsfiles (process per role)', split],
    ...baseline,
    ...(variant ? ([[variantName, variant]] as const) : []),
    ...(bare ? ([['bare reference', bare]] as const) : []),
  ] as const) {
    targets.push({ name, sys, poller: new Poller(sys.readerUrl!, sys.key), etag: undefined });
  }

  return targets;
}

/** Announcements, timed by a subscriber of our own: sha256 → when it was seen. */
async function subscribeAnnouncements(targets: readonly Target[]): Promise<{ announced: Map<string, number>; sub: Redis }> {
  const announced = new Map<string, number>();
  const sub = new Redis(TEST_REDIS_URL);
  await new Promise((r) => sub.once('ready', r));
  await sub.subscribe(...targets.map((t) => t.sys.channel));
  sub.on('message', (_c: string, message: string) => {
    const at = nowMs();
    const m = JSON.parse(message) as { entry?: { sha256: string }; sha?: string };
    const sha = m.entry?.sha256 ?? m.sha;
    if (sha) announced.set(sha, at);
  });

  return { announced, sub };
}

/** Blocks of measured drops per system, interleaved in shuffled order, alone and with background drops. */
async function measureFreshness(
  targets: readonly Target[],
  template: DocTemplate,
  dropper: Dropper,
  announced: Map<string, number>,
  allPids: () => number[],
): Promise<{ samples: Sample[]; backlog: Record<string, { sent: number; ms: number; drainMs: number }[]> }> {
  const samples: Sample[] = [];
  const backlog: Record<string, { sent: number; ms: number; drainMs: number }[]> = {};
  for (const condition of CONDITIONS) {
    for (let b = 0; b < Math.ceil(DROPS / BLOCK); b++) {
      for (const t of shuffle([...targets])) {
        if (condition === 'loaded') {
          dropper.begin(t.sys.inbox, RATE);
          await sleep(1000);
        }
        const n = Math.min(BLOCK, DROPS - b * BLOCK);
        const block: Sample[] = [];
        for (let i = 0; i < n; i++) block.push(await measureOne(t, template, condition));
        if (condition === 'loaded') {
          const r = await dropper.end();
          const t1 = Date.now();
          const ok = await waitDrained(t.sys, 60_000);
          (backlog[t.name] ??= []).push({ ...r, drainMs: ok ? Date.now() - t1 : Number.POSITIVE_INFINITY });
        }
        if (PUT) {
          // No stages: they are a drop's (watcher, claim…).
        } else if (t.sys instanceof OddsfilesSystem) await breakdown(t.sys, MEASURED.filename, block, announced);
        else for (const s of block) s.stages = bareStages(s, announced);
        samples.push(...block);
        await quiesce(allPids());
        const fr = block.map((s) => s.fresh);
        log(`${condition} block ${b + 1}: ${t.name}: p50 ${fmtMs(median(fr))} ms, max ${fmtMs(Math.max(...fr))} ms`);
      }
    }
  }
  return { samples, backlog };
}

/** The watcher stage alone, for each watcher. */
async function measureWatchers(template: DocTemplate): Promise<{ spaced: WatchResults; quick: WatchResults }> {
  // Spaced drops (the claim 5–10 ms after the event, the next drop 150–200 ms later), then quick
  // re-drops of the same filename (the next one 0–60 ms after the claim, as a feed updated
  // several times a second, or a burst, does).
  const watchSpaced = {} as Record<WatcherName, { latency: number[]; missed: number }>;
  const watchQuick = {} as Record<WatcherName, { latency: number[]; missed: number }>;
  for (const w of PUT ? [] : WATCHERS) {
    watchSpaced[w] = await watcherStage(w, WATCH_DROPS, template, { claimAfter: [5, 10], nextAfter: [150, 200] });
    watchQuick[w] = await watcherStage(w, 4 * WATCH_DROPS, template, { claimAfter: [2, 10], nextAfter: [0, 60] });
  }

  return { spaced: watchSpaced, quick: watchQuick };
}

function freshnessTable(
  targets: readonly Target[],
  samples: readonly Sample[],
  backlog: Record<string, { sent: number; ms: number; drainMs: number }[]>,
): string {
  const bareOf = (c: Condition) => samples.filter((s) => s.system === 'bare reference' && s.condition === c).map((s) => s.fresh);
  const rows: string[][] = [];
  for (const condition of CONDITIONS) {
    const ref = bareOf(condition);
    for (const t of targets) {
      const fr = samples.filter((s) => s.system === t.name && s.condition === condition).map((s) => s.fresh);
      const p50 = median(fr);
      const p99 = quantile(fr, 0.99);
      const isRef = t.sys.kind === 'bare';
      const target = isRef ? '' : `${p50 <= 15 ? 'met' : '**missed**'} / ${p99 <= 50 ? 'met' : '**missed**'}`;
      const bl = backlog[t.name];
      const load =
        condition === 'loaded' && bl
          ? `${Math.round(median(bl.map((x) => (x.sent * 1000) / x.ms)))}/s; drained in ${fmtMs(median(bl.map((x) => x.drainMs)))} ms`
          : '';
      rows.push([
        condition,
        t.name,
        String(fr.length),
        fmtMs(p50),
        fmtMs(quantile(fr, 0.9)),
        fmtMs(p99),
        isRef ? '1.00×' : PUT ? '—' : fmtX(p50 / median(ref)),
        isRef ? '1.00×' : PUT ? '—' : fmtX(p99 / quantile(ref, 0.99)),
        target,
        load,
      ]);
    }
  }
  return table(
    ['condition', 'system', 'drops', 'p50 ms', 'p90 ms', 'p99 ms', 'p50 / bare', 'p99 / bare', 'target p50 ≤ 15 / p99 ≤ 50', 'background drops, drain after'],
    rows,
    ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'l', 'l'],
  );
}

/** Median ms of each stage, per system and condition. */
function breakdownTable(targets: readonly Target[], samples: readonly Sample[]): string {
  const bdRows: string[][] = [];
  for (const condition of CONDITIONS) {
    for (const t of targets) {
      const ss = samples.filter((s) => s.system === t.name && s.condition === condition && s.stages);
      if (ss.length === 0) continue;
      const med = (k: string) => median(ss.map((s) => s.stages![k] ?? Number.NaN).filter((v) => Number.isFinite(v)));
      const p50 = median(ss.map((s) => s.fresh));
      const cells = STAGES.map((k) => {
        const v = med(k);
        return Number.isFinite(v) ? `${fmtMs(v)} (${Math.round((v / p50) * 100)} %)` : '—';
      });
      const carried = ss.filter((s) => (s.carriedTo ?? 0) > 0).length;
      bdRows.push([condition, t.name, fmtMs(p50), ...cells, t.name.startsWith('bare') ? '—' : `${carried} of ${ss.length}`]);
    }
  }
  return table(['condition', 'system', 'p50 ms', ...STAGES.map((s) => `${s} ms`), 'carried'], bdRows, ['l', 'l', 'r', ...STAGES.map(() => 'r' as const), 'r']);
}

/** The slowest drops of each oddsfiles system, with their stages: what makes the tail. */
function slowestTable(targets: readonly Target[], samples: readonly Sample[]): string {
  const slowRows: string[][] = [];
  for (const condition of CONDITIONS) {
    for (const t of targets.filter((x) => x.sys.kind === 'oddsfiles')) {
      const ss = samples
        .filter((s) => s.system === t.name && s.condition === condition)
        .sort((a, b) => b.fresh - a.fresh)
        .slice(0, 3);
      for (const s of ss) {
        const st = s.stages ?? {};
        slowRows.push([condition, t.name, fmtMs(s.fresh), ...STAGES.map((k) => (st[k] === undefined ? '—' : fmtMs(st[k]!)))]);
      }
    }
  }
  return table(['condition', 'system', 'freshness ms', ...STAGES.map((s) => `${s} ms`)], slowRows, ['l', 'l', 'r', ...STAGES.map(() => 'r' as const)]);
}

function watcherTable(watchSpaced: WatchResults, watchQuick: WatchResults): string {
  const ref = (w: typeof watchSpaced) => median(w[WATCHERS[2]].latency);
  const wRows = (PUT ? [] : WATCHERS).map((name) => {
    const a = watchSpaced[name];
    const b = watchQuick[name];
    const n = b.latency.length + b.missed;
    return [
      name,
      fmtMs(median(a.latency)),
      fmtMs(quantile(a.latency, 0.99)),
      fmtX(median(a.latency) / ref(watchSpaced)),
      `${a.missed} of ${a.latency.length + a.missed}`,
      `${b.missed} of ${n} (${Math.round((b.missed / n) * 100)} %)`,
      fmtMs(median(b.latency)),
    ];
  });
  return table(['watcher', 'spaced: p50 ms', 'p99 ms', 'p50 / fs.watch', 'missed', 'quick re-drops: missed', 'p50 ms'], wRows);
}

function report(
  machine: ReturnType<typeof machineInfo>,
  template: DocTemplate,
  measuredS: number,
  tables: { fresh: string; breakdown: string; slow: string; watchers: string },
): string {
  const { fresh: freshTable, breakdown: bdTable, slow: slowTable, watchers: wTable } = tables;
  return PUT
    ? [
        `${machineLine(machine)}`,
        '',
        `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; PUT /v1/data/${MEASURED.filename} (${template.bytes.length} bytes) → first GET serving the new version, polled from the moment the PUT starts; ${DROPS} PUTs per system and condition, blocks of ${BLOCK} interleaved; background ${RATE}/s drops over the other ${OTHERS.length} feeds; ${measuredS} s of measurement.`,
        '',
        freshTable,
      ].join('\n')
    : [
        `${machineLine(machine)}`,
        '',
        `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; measured feed \`${MEASURED.filename}\`, ${template.bytes.length} bytes; ${DROPS} drops per system and condition, blocks of ${BLOCK} interleaved (shuffled order), background ${RATE}/s over the other ${OTHERS.length} feeds (${KB} KB each); ${measuredS} s of measurement. p99 of ${DROPS} samples is the largest but one at most (nearest rank).`,
        '',
        freshTable,
        '',
        "Breakdown, median ms of each stage (share of the p50). watcher: rename → job queued (`receivedAt`); queue: → job active (`processedOn`); claim: → publish step starts (lstat + rename into .processing); read+validate, store (includes the `catalog.get` before it), commit: the worker's `timings`; reader: our subscriber saw the announcement → the poller got the new version; other: the rest (rounding of ms log times, announcement transit); carried: drops whose bytes reached the reader with their announcement (`ingest.carry_max_bytes`; in one process the reader is handed them directly and nothing is carried). For bare: watcher = rename → announcement, reader as above.",
        '',
        bdTable,
        '',
        "The three slowest drops of each oddsfiles system (what makes its p99), with their stages (— : the worker's log line or the job was not found):",
        '',
        slowTable,
        '',
        `The watcher stage alone: renames of a ${KB} KB file` +
          " into a folder watched by one watcher at a time (the service's kernel fs.watch; chokidar with the options the service once gave it, listening to `add` and `change`), each file moved out 2–10 ms after it was reported, as a claim does. Spaced: the next drop of the filename 150–200 ms after the claim. Quick re-drops: 0–60 ms after the claim (a feed updated several times a second, a burst). Missed: not reported within 300 ms (the service's rescan finds such a drop within `ingest.rescan`, 5 s).",
        '',
        wTable,
      ].join('\n');
}

async function measureOne(t: Target, tmpl: DocTemplate, condition: Condition): Promise<Sample> {
  const r =
    PUT && t.sys instanceof OddsfilesSystem
      ? await putAndPoll(t.sys, t.poller, tmpl, t.etag, 10_000, POLL_GAP_MS)
      : await dropAndPoll(t.sys, t.poller, tmpl, t.etag, 10_000, POLL_GAP_MS);
  t.etag = r.etag;
  await sleep(30 + Math.random() * 50);
  return { system: t.name, condition, fresh: r.fresh, polls: r.polls, t0: r.t0, served: r.served, sha256: r.sha256, generatedAt: r.generatedAt };
}

runMain(main);
