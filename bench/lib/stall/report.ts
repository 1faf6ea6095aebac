/**
 * What the stall bench prints at its end: with --cpu-prof, where the reader spent its time in all
 * and in each pattern (progress lines); then the report, the table of the patterns against their
 * goals, the floor of (a), the reader's RSS after (a) and (b), and the patch's size and CPU goals.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Span } from '../common/profile.js';
import { machineLine, type MachineInfo } from '../common/machine.js';
import { summarizeProfile } from '../common/profile.js';
import { table } from '../common/report.js';
import { log } from '../common/run.js';
import type { PatchCost } from './cost.js';
import type { BuildFloor, Floor } from './floor.js';
import { MB } from './meter.js';

/** The reader's CPU profile (in `probeDir`, written by --cpu-prof at its exit), whole and cut to each span. */
export async function logReaderProfile(probeDir: string, pid: number, spans: readonly Span[]): Promise<void> {
  const file = (await readdir(probeDir)).find((f) => f.endsWith('.cpuprofile') && f.includes(`.${pid}.`));
  if (!file) return;
  for (const span of [undefined, ...spans]) {
    const p = summarizeProfile(join(probeDir, file), 25, span);
    log(`reader profile${span ? ` of ${span.label}` : ''}: busy ${p.busyMs.toFixed(0)} ms`);
    for (const [name, ms] of [...p.groups, ...p.functions]) log(`  ${ms.toFixed(0).padStart(6)} ms  ${name}`);
  }
}

export interface StallResults {
  readonly machine: MachineInfo;
  /** The command line as run (common/cli.ts commandLine). */
  readonly command: string;
  readonly seconds: number;
  /** The phases' rows (meter.ts), and the steady client's p99 against the idle reader. */
  readonly rows: readonly (readonly string[])[];
  readonly idleSteadyP99: number;
  readonly floor: Floor | undefined;
  readonly buildFloor: BuildFloor | undefined;
  /** The reader's RSS 12 s after (a) and after (b), bytes. */
  readonly afterA: number;
  readonly afterB: number;
  readonly cost: PatchCost;
  /** Requests per kind in each round of the CPU comparison. */
  readonly requests: number;
}

export function stallReport(r: StallResults): string {
  const { floor, cost } = r;
  return [
    machineLine(r.machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${r.command}\`; the machine was shared with other work. Processes: watcher+worker, and the reader (measured) with \`deltas\` at their defaults (8 MiB, 1 s, 1 thread), both with the Docker image's \`MALLOC_ARENA_MAX=2\`, \`MALLOC_MMAP_THRESHOLD_\` and \`MALLOC_TRIM_THRESHOLD_=131072\` and \`--max-semi-space-size=4\`. Each pattern runs ${r.seconds} s (the idle reader and (b) half that); loop delay is the reader's own (monitorEventLoopDelay, 1 ms resolution); the steady client asks /v1/files and /healthz in turn, 10 ms apart.`,
    '',
    table(
      [
        'pattern',
        'reader loop delay p99 (≤ 20 ms)',
        'reader GC pauses: count, total, longest',
        `steady client p99 (≤ 2× idle: ${(2 * r.idleSteadyP99).toFixed(1)} ms)`,
        'reader RSS peak',
        'published',
        'outcome',
      ],
      r.rows,
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
    ...(r.buildFloor
      ? [
          `The floor of (a)'s memory: a bare Node process doing only (a)'s 8 builds with the reader's build step (the newest version parsed once and kept, as a build thread keeps it; the image's memory options): ${r.buildFloor.loadedMb.toFixed(0)} MB once loaded, peak ${r.buildFloor.mainPeakMb.toFixed(0)} MB building on its main thread, ${r.buildFloor.threadPeakMb.toFixed(0)} MB in one worker thread (as the reader builds).`,
          '',
        ]
      : []),
    `Reader RSS 12 s after (a): ${(r.afterA / MB).toFixed(0)} MB; after (b): ${(r.afterB / MB).toFixed(0)} MB (goal during them: ≤ 100 MB + 3× the published bytes).`,
    '',
    `One version behind, ${(cost.liveBytes / 1000).toFixed(0)} KB live file, 5 % of the prices moved: JSON Patch (gzip) ${cost.patch} bytes against the gzip whole file ${cost.wholeGzip} bytes: 1/${(cost.wholeGzip / Math.max(1, cost.patch)).toFixed(0)} (goal ≤ 1/20). Reader CPU per answer over ${2 * r.requests} requests each: the patch (226) ${(cost.cpu.patch / 2).toFixed(3)} ms, its 304 ${(cost.cpu.notModified / 2).toFixed(3)} ms: ${(cost.cpu.patch / cost.cpu.notModified).toFixed(2)}× (goal ≤ 1.5×).`,
  ].join('\n');
}
