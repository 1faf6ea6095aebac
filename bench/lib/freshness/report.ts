/**
 * The freshness bench's report: freshness per system and condition against the bare reference and
 * the targets, the median of each stage, the slowest drops with their stages, and the watcher
 * stage alone (under --put: the first table only, PUTs have no stages).
 */
import type { DocTemplate } from '../common/drops.js';
import type { Backlog, Condition, FreshnessPlan, WatchResults } from './measure.js';
import { STAGES, type Sample } from './stages.js';
import type { Target } from './targets.js';
import { machineLine, type MachineInfo } from '../common/machine.js';
import { table } from '../common/report.js';
import { fmtMs, fmtX, median, quantile } from '../common/stats.js';
import { WATCHERS } from './watcher-stage.js';

/** Freshness percentiles per system and condition, their ratio to the bare reference's, the targets met, the background load. */
export function freshnessTable(targets: readonly Target[], samples: readonly Sample[], backlog: Backlog, plan: FreshnessPlan): string {
  const bareOf = (c: Condition) => samples.filter((s) => s.system === 'bare reference' && s.condition === c).map((s) => s.fresh);
  const rows: string[][] = [];
  for (const condition of plan.conditions) {
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
        isRef ? '1.00×' : plan.put ? '—' : fmtX(p50 / median(ref)),
        isRef ? '1.00×' : plan.put ? '—' : fmtX(p99 / quantile(ref, 0.99)),
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
export function breakdownTable(targets: readonly Target[], samples: readonly Sample[], plan: FreshnessPlan): string {
  const bdRows: string[][] = [];
  for (const condition of plan.conditions) {
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
export function slowestTable(targets: readonly Target[], samples: readonly Sample[], plan: FreshnessPlan): string {
  const slowRows: string[][] = [];
  for (const condition of plan.conditions) {
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

/** Each watcher's latency and misses, on spaced drops and on quick re-drops, against fs.watch's. */
export function watcherTable(watchSpaced: WatchResults, watchQuick: WatchResults, plan: FreshnessPlan): string {
  const ref = (w: typeof watchSpaced) => median(w[WATCHERS[2]].latency);
  const wRows = (plan.put ? [] : WATCHERS).map((name) => {
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

export interface FreshnessReport {
  readonly machine: MachineInfo;
  /** The command line as run (common/cli.ts commandLine). */
  readonly command: string;
  readonly template: DocTemplate;
  /** Seconds the measured blocks took. */
  readonly measuredS: number;
  readonly tables: { readonly fresh: string; readonly breakdown: string; readonly slow: string; readonly watchers: string };
}

/** The report: how the run went, then the tables with what each shows. */
export function freshnessReport(r: FreshnessReport, plan: FreshnessPlan): string {
  const { machine, command, template, measuredS } = r;
  const { fresh: freshTable, breakdown: bdTable, slow: slowTable, watchers: wTable } = r.tables;
  const { measured, drops, block, rate, others, kb } = plan;
  return plan.put
    ? [
        `${machineLine(machine)}`,
        '',
        `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${command}\`; PUT /v1/data/${measured} (${template.bytes.length} bytes) → first GET serving the new version, polled from the moment the PUT starts; ${drops} PUTs per system and condition, blocks of ${block} interleaved; background ${rate}/s drops over the other ${others} feeds; ${measuredS} s of measurement.`,
        '',
        freshTable,
      ].join('\n')
    : [
        `${machineLine(machine)}`,
        '',
        `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${command}\`; measured feed \`${measured}\`, ${template.bytes.length} bytes; ${drops} drops per system and condition, blocks of ${block} interleaved (shuffled order), background ${rate}/s over the other ${others} feeds (${kb} KB each); ${measuredS} s of measurement. p99 of ${drops} samples is the largest but one at most (nearest rank).`,
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
        `The watcher stage alone: renames of a ${kb} KB file` +
          " into a folder watched by one watcher at a time (the service's kernel fs.watch; chokidar with the options the service once gave it, listening to `add` and `change`), each file moved out 2–10 ms after it was reported, as a claim does. Spaced: the next drop of the filename 150–200 ms after the claim. Quick re-drops: 0–60 ms after the claim (a feed updated several times a second, a burst). Missed: not reported within 300 ms (the service's rescan finds such a drop within `ingest.rescan`, 5 s).",
        '',
        wTable,
      ].join('\n');
}
