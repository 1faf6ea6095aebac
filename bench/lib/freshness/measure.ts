/**
 * The measured parts of the freshness bench: one drop (or PUT) polled until served, blocks of
 * them per system interleaved in shuffled order, alone and with background drops of the other
 * feeds, each block broken into stages (stages.ts); then the watcher stage alone
 * (watcher-stage.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { DocTemplate } from '../common/drops.js';
import type { Dropper } from '../common/dropper.js';
import { bareStages, breakdown, type Sample } from './stages.js';
import type { Target } from './targets.js';
import { OddsfilesSystem } from '../common/oddsfiles-system.js';
import { quiesce } from '../common/proc.js';
import { dropAndPoll, putAndPoll, waitDrained } from '../common/rounds.js';
import { log } from '../common/run.js';
import { fmtMs, median, shuffle } from '../common/stats.js';
import { WATCHERS, watcherStage, type WatcherName } from './watcher-stage.js';

export type Condition = 'alone' | 'loaded';

/** What a run measures, from the command line. */
export interface FreshnessPlan {
  /** PUT /v1/data → first GET serving it, instead of the rename of a drop. */
  readonly put: boolean;
  readonly conditions: readonly Condition[];
  /** Measured drops per system and condition, and per block. */
  readonly drops: number;
  readonly block: number;
  /** Background drops per second in the loaded condition. */
  readonly rate: number;
  /** Size of every drop, KiB. */
  readonly kb: number;
  /** Pause between two polls, ms. */
  readonly pollGapMs: number;
  /** Spaced drops per watcher in the watcher stage. */
  readonly watchDrops: number;
  /** The measured feed's filename, and how many other feeds the background drops cover. */
  readonly measured: string;
  readonly others: number;
}

/** Per system: the background drops of each loaded block (sent, over ms) and how long the system took to drain them. */
export type Backlog = Record<string, { sent: number; ms: number; drainMs: number }[]>;

export type WatchResults = Record<WatcherName, { latency: number[]; missed: number }>;

/** One measured drop (or PUT, oddsfiles systems under --put) of `tmpl` at `t`, then a pause of 30–80 ms. */
export async function measureOne(t: Target, tmpl: DocTemplate, condition: Condition, plan: FreshnessPlan): Promise<Sample> {
  const r =
    plan.put && t.sys instanceof OddsfilesSystem
      ? await putAndPoll(t.sys, t.poller, tmpl, t.etag, 10_000, plan.pollGapMs)
      : await dropAndPoll(t.sys, t.poller, tmpl, t.etag, 10_000, plan.pollGapMs);
  t.etag = r.etag;
  await sleep(30 + Math.random() * 50);
  return { system: t.name, condition, fresh: r.fresh, polls: r.polls, t0: r.t0, served: r.served, sha256: r.sha256, generatedAt: r.generatedAt };
}

/** Publish the measured feed once everywhere, and warm up every path: three drops per system. */
export async function warmUp(targets: readonly Target[], tmpl: DocTemplate, plan: FreshnessPlan): Promise<void> {
  for (const t of targets) {
    for (let i = 0; i < 3; i++) await measureOne(t, tmpl, 'alone', plan);
  }
}

export interface FreshnessRun {
  readonly targets: readonly Target[];
  readonly template: DocTemplate;
  readonly dropper: Dropper;
  /** sha256 → when the bench's subscriber saw its announcement. */
  readonly announced: Map<string, number>;
  /** Every process of the run, waited on to go quiet between blocks. */
  readonly allPids: () => number[];
}

/** Blocks of measured drops per system, interleaved in shuffled order, alone and with background drops. */
export async function measureFreshness(run: FreshnessRun, plan: FreshnessPlan): Promise<{ samples: Sample[]; backlog: Backlog }> {
  const { template, dropper, announced, allPids } = run;
  const samples: Sample[] = [];
  const backlog: Backlog = {};
  for (const condition of plan.conditions) {
    for (let b = 0; b < Math.ceil(plan.drops / plan.block); b++) {
      for (const t of shuffle([...run.targets])) {
        if (condition === 'loaded') {
          dropper.begin(t.sys.inbox, plan.rate);
          await sleep(1000);
        }
        const n = Math.min(plan.block, plan.drops - b * plan.block);
        const block: Sample[] = [];
        for (let i = 0; i < n; i++) block.push(await measureOne(t, template, condition, plan));
        if (condition === 'loaded') {
          const r = await dropper.end();
          const t1 = Date.now();
          const ok = await waitDrained(t.sys, 60_000);
          (backlog[t.name] ??= []).push({ ...r, drainMs: ok ? Date.now() - t1 : Number.POSITIVE_INFINITY });
        }
        if (plan.put) {
          // No stages: they are a drop's (watcher, claim…).
        } else if (t.sys instanceof OddsfilesSystem) await breakdown(t.sys, plan.measured, block, announced);
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

/** The watcher stage alone, for each watcher (none under --put). */
export async function measureWatchers(template: DocTemplate, plan: FreshnessPlan): Promise<{ spaced: WatchResults; quick: WatchResults }> {
  // Spaced drops (the claim 5–10 ms after the event, the next drop 150–200 ms later), then quick
  // re-drops of the same filename (the next one 0–60 ms after the claim, as a feed updated
  // several times a second, or a burst, does).
  const spaced = {} as WatchResults;
  const quick = {} as WatchResults;
  for (const w of plan.put ? [] : WATCHERS) {
    spaced[w] = await watcherStage(w, plan.watchDrops, template, { claimAfter: [5, 10], nextAfter: [150, 200] });
    quick[w] = await watcherStage(w, 4 * plan.watchDrops, template, { claimAfter: [2, 10], nextAfter: [0, 60] });
  }

  return { spaced, quick };
}
