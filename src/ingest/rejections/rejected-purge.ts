/**
 * Keeping REJECTED_DIR from growing for ever: `oddsfiles rejected purge --older-than` and, with
 * `ingest.rejected_retention` set, every worker process now and then. A rejected drop's age is its
 * received_at (reason.json), else the time its id starts with; a folder with neither is left alone.
 * The entries of what is removed leave the rejection log too (status stops listing them).
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../log.js';
import { readRejection, rejectionIds } from './rejected.js';

export interface PurgedRejection {
  readonly id: string;
  readonly filename: string | undefined;
  readonly received_at: string;
}

/** Ids start with the time of receipt, compact ISO 8601: 20261125T151145938Z-<claim id>. */
function timeOfId(id: string): number {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(\d{3})Z-/.exec(id);
  return m ? Date.parse(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.${m[7]}Z`) : Number.NaN;
}

/**
 * Remove (or with dryRun only list) the rejected drops received before `before` (ms since the
 * epoch), oldest first. `forget` takes the removed ids out of the rejection log.
 */
export async function purgeRejections(
  rejectedDir: string,
  before: number,
  options: { dryRun?: boolean; forget?: (ids: string[]) => Promise<void> } = {},
): Promise<PurgedRejection[]> {
  const old: PurgedRejection[] = (await datedRejections(rejectedDir))
    .filter((r) => r.receivedMs < before)
    .map((r) => ({ id: r.id, filename: r.filename, received_at: r.received_at }));
  if (options.dryRun) return old;
  return removeRejections(rejectedDir, old, options.forget);
}

export interface DatedRejection extends PurgedRejection {
  readonly receivedMs: number;
}

/** The rejected drops whose time of receipt is known, oldest first. */
export async function datedRejections(rejectedDir: string): Promise<DatedRejection[]> {
  const out: DatedRejection[] = [];
  for (const id of await rejectionIds(rejectedDir)) {
    const record = await readRejection(rejectedDir, id);
    const at = record ? Date.parse(record.received_at) : Number.NaN;
    const received = Number.isFinite(at) ? at : timeOfId(id);
    if (!Number.isFinite(received)) continue;
    out.push({ id, filename: record?.filename, received_at: new Date(received).toISOString(), receivedMs: received });
  }
  return out.sort((a, b) => a.receivedMs - b.receivedMs);
}

/** Remove these rejected drops, and (forget) their entries of the rejection log. */
export async function removeRejections<T extends PurgedRejection>(rejectedDir: string, which: T[], forget?: (ids: string[]) => Promise<void>): Promise<T[]> {
  for (const r of which) await rm(join(rejectedDir, r.id), { recursive: true, force: true });
  if (which.length > 0) await forget?.(which.map((r) => r.id));
  return which;
}

export interface RetentionDeps {
  readonly rejectedDir: string;
  /** ingest.rejected_retention; 0: off. */
  readonly retentionMs: number;
  readonly forget: (ids: string[]) => Promise<void>;
  readonly log: Logger;
  /** How often to look; default: an hour, or the retention when shorter (at least a second). */
  readonly everyMs?: number;
}

/** Purge at once, then periodically (the timer never keeps the process alive); returns the stop function. */
export function startRejectedRetention(deps: RetentionDeps): () => Promise<void> {
  if (deps.retentionMs <= 0) return async () => undefined;
  const everyMs = deps.everyMs ?? Math.max(1000, Math.min(3_600_000, deps.retentionMs));
  let running: Promise<void> | undefined;
  const run = () =>
    (running ??= purgeRejections(deps.rejectedDir, Date.now() - deps.retentionMs, { forget: deps.forget })
      .then(
        (removed) => {
          if (removed.length > 0)
            deps.log.info({ removed: removed.length, rejectedDir: deps.rejectedDir }, 'removed rejected drops past ingest.rejected_retention');
        },
        (err: unknown) =>
          deps.log.warn({ err: { message: (err as Error).message }, rejectedDir: deps.rejectedDir }, 'could not purge old rejected drops; retrying later'),
      )
      .finally(() => (running = undefined)));
  void run();
  const timer = setInterval(() => void run(), everyMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
