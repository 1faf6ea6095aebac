/**
 * Where each freshness drop's time went: its stages from the worker's log line (timings, jobId),
 * its BullMQ job (receivedAt, processedOn), the announcement seen by a subscriber of the bench,
 * and the poller's clock.
 */
import type { OddsfilesSystem } from '../common/oddsfiles-system.js';

export interface Sample {
  readonly system: string;
  readonly condition: string;
  readonly fresh: number;
  readonly polls: number;
  stages?: Record<string, number>;
  /** How many readers of other processes got the version's bytes with its announcement (the worker's `carriedTo`). */
  carriedTo?: number;
  // for the breakdown
  readonly t0: number;
  readonly served: number;
  readonly sha256: string;
  readonly generatedAt: string;
}

export const STAGES = ['watcher', 'queue', 'claim', 'read+validate', 'store', 'commit', 'reader', 'other'] as const;

export function bareStages(s: Sample, announced: Map<string, number>): Record<string, number> {
  const ann = announced.get(s.sha256);
  if (ann === undefined) return {};
  return { watcher: ann - s.t0, reader: s.served - ann };
}

/** Attach each drop's stages from the worker's log line, its BullMQ job and the announcement. */
export async function breakdown(sys: OddsfilesSystem, filename: string, block: Sample[], announced: Map<string, number>): Promise<void> {
  const lines = sys.procs.flatMap((p) => p.readLines('"jobId"'));
  const byGen = new Map(lines.filter((l) => l.filename === filename && l.outcome === 'published').map((l) => [l.generatedAt as string, l]));
  const queue = sys.ingestQueue();
  for (const s of block) {
    const line = byGen.get(s.generatedAt);
    const ann = announced.get(s.sha256);
    if (!line || ann === undefined) continue;
    const job = await queue.getJob(String(line.jobId));
    if (!job?.processedOn) continue;
    const timings = line.timings as Record<string, number>;
    const logged = Date.parse(line.time as string);
    const stages: Record<string, number> = {
      watcher: job.data.receivedAt - s.t0,
      queue: job.processedOn - job.data.receivedAt,
      claim: logged - timings.total! - job.processedOn,
      'read+validate': timings.read! + timings.validate!,
      store: timings.store!,
      commit: timings.commit!,
      reader: s.served - ann,
    };
    stages.other = s.fresh - Object.values(stages).reduce((a, b) => a + b, 0);
    s.stages = stages;
    if (typeof line.carriedTo === 'number') s.carriedTo = line.carriedTo;
  }
}
