/**
 * `oddsfiles status`: one look at the whole system. Queue counts (and connected workers), every
 * feed of the registry with its generated_at, age and size (stale ones marked by their kind's
 * stale_after, never-published ones listed, ones stamped ahead of the clock marked), the last
 * rejections with their reasons, and the last superseded drops with the generated_at that won.
 * `--json` for machines (fields: now, redis (the server answering: the primary in use behind
 * Sentinel), seq, queue, workers, feeds, missing, stale, ahead, rejections,
 * superseded, changes, folders: this command's INBOX_DIR and REJECTED_DIR and whether the running
 * workers watch that inbox).
 * Exit 1 when a feed is stale.
 */
import type { Command } from 'commander';
import { createChangeLog } from '../catalog/change-log.js';
import { createCatalog } from '../catalog/redis-catalog.js';
import type { CatalogEntry } from '../catalog/types.js';
import type { Config } from '../config.js';
import { formatAge } from '../duration.js';
import { InboxMismatchError, UsageError } from '../errors.js';
import { buildRegistry, parseFilename } from '../feeds/registry.js';
import { createRejectionLog } from '../ingest/rejections/rejection-log.js';
import { createSupersededLog, type SupersededRecord } from '../ingest/rejections/superseded-log.js';
import { readChangeStats, type ChangeStats } from '../ops/change-stats.js';
import { createQueueCounts } from '../ops/queue-counts.js';
import type { RejectionRecord } from '../ingest/rejections/rejected.js';
import { connectedServer } from '../redis/connect.js';
import type { CliContext } from './context.js';
import { describeFolders, statusFolders, type StatusFolders } from './status-folders.js';
import { formatTable } from './table.js';

/**
 * BullMQ's job states. A settled drop completes its job whatever its outcome (rejected included);
 * `failed` counts jobs that failed for good (retries used up, or stalled too often): real failures.
 */
const QUEUE_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'failed', 'completed'] as const;
/** Shown only when not zero: a paused queue or parked children are worth a look. */
const RARE_STATES = ['paused', 'waiting-children'] as const;

export interface FeedStatus extends CatalogEntry {
  /** Milliseconds since generated_at. */
  readonly ageMs: number;
  /** Milliseconds since this version was published. */
  readonly publishedAgeMs: number;
  readonly stale: boolean;
  readonly staleAfterMs: number;
  /** Milliseconds generated_at is ahead of now (0 when not in the future). */
  readonly aheadMs: number;
  /** Ahead by more than AHEAD_MARK_MS: drops stamped with the right time are superseded until the clock catches up. */
  readonly ahead: boolean;
}

/** A published generated_at this far ahead of the clock is marked: a publisher's clock running fast. */
export const AHEAD_MARK_MS = 60_000;

/** How many of the last superseded drops `status` shows. */
const SUPERSEDED_SHOWN = 5;

export interface StatusReport {
  readonly now: string;
  /** The Redis server answering (`host:port`): behind Sentinel, the primary in use. */
  readonly redis: string | null;
  readonly seq: number;
  readonly queue: Record<string, number>;
  /** Workers connected to the queue; null when Redis does not say (CLIENT LIST refused). */
  readonly workers: number | null;
  readonly feeds: FeedStatus[];
  /** Registry filenames never published. */
  readonly missing: string[];
  /** How many published feeds are stale. */
  readonly stale: number;
  /** How many published feeds are stamped ahead of the clock (FeedStatus.ahead). */
  readonly ahead: number;
  readonly rejections: RejectionRecord[];
  /** The last superseded drops, newest first, with the published generated_at that won. */
  readonly superseded: SupersededRecord[];
  /** The change log's span, and what the readers' change endpoints are doing (summed over readers). */
  readonly changes: ChangeStats & { readonly readers: number; readonly position: number; readonly oldest: number | null };
  /** This command's folders (absolute) and whether the running workers watch its inbox. */
  readonly folders: StatusFolders;
}

/** The feeds part of the report: pure, for tests and for anyone holding a snapshot. */
export function feedStatuses(entries: readonly CatalogEntry[], staleAfterMs: Config['staleAfterMs'], now: number): FeedStatus[] {
  return entries.map((e) => {
    const after = staleAfterMs[e.kind];
    const ageMs = now - e.generatedAtMs;
    const published = Date.parse(e.publishedAt);
    const aheadMs = Math.max(0, -ageMs);
    return {
      ...e,
      ageMs,
      publishedAgeMs: Number.isFinite(published) ? now - published : Number.NaN,
      staleAfterMs: after,
      stale: ageMs > after,
      aheadMs,
      ahead: aheadMs > AHEAD_MARK_MS,
    };
  });
}

export function registerStatusCommand(program: Command, ctx: CliContext): void {
  program
    .command('status')
    .description('queue counts, every feed with its age (stale ones marked), the last rejections; exit 1 when a feed is stale')
    .option('--json', 'machine-readable output')
    .option('--rejections <n>', 'how many recent rejections to show', '10')
    .action(async (opts: { json?: boolean; rejections: string }) => {
      const wanted = Number(opts.rejections);
      if (!Number.isInteger(wanted) || wanted < 0) throw new UsageError(`--rejections takes a whole number, not "${opts.rejections}"`);
      const config = ctx.config();
      const redis = await ctx.redis();
      // Plain ioredis reads of BullMQ's keys: status never loads BullMQ.
      const queue = createQueueCounts(redis, config.redis.prefix);
      const now = Date.now();
      const registry = buildRegistry(config.bookmakers, config.sports);
      const [counts, workers, snapshot, rejections, bounds, changeStats, superseded, folders] = await Promise.all([
        queue.getJobCounts(...QUEUE_STATES, ...RARE_STATES),
        queue.getWorkersCount().catch(() => null),
        createCatalog(redis, ctx.keys()).snapshot(),
        wanted > 0 ? createRejectionLog(redis, ctx.keys()).latest(wanted) : Promise.resolve([]),
        createChangeLog(redis, ctx.keys()).bounds(),
        readChangeStats(redis, ctx.keys()),
        createSupersededLog(redis, ctx.keys()).latest(SUPERSEDED_SHOWN),
        statusFolders(ctx),
      ]);
      const changes = { position: bounds.last, oldest: bounds.first ?? null, ...changeStats };
      const feeds = feedStatuses(snapshot.entries, config.staleAfterMs, now);
      const published = new Set(feeds.map((f) => f.filename));
      const missing = registry.filenames.filter((n) => !published.has(n));
      const stale = feeds.filter((f) => f.stale).length;
      const ahead = feeds.filter((f) => f.ahead).length;
      const report: StatusReport = {
        now: new Date(now).toISOString(),
        redis: connectedServer(redis) ?? null,
        seq: snapshot.seq,
        queue: counts,
        workers,
        feeds,
        missing,
        stale,
        ahead,
        rejections,
        superseded,
        changes,
        folders,
      };
      if (folders.inboxState === 'other') {
        // An inbox folder here that the workers do not watch is another deployment's (or a stray
        // copy): refused. No inbox folder here at all (a reader's host): said, not refused.
        if (folders.inboxExists) throw new InboxMismatchError(folders.inbox, folders.workersWatch);
        ctx.io.stderr.write(`warning: ${describeFolders(folders)}\n`);
      }
      if (opts.json) ctx.io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      else ctx.io.stdout.write(renderText(report, registry, now));
      if (stale > 0) process.exitCode = 1;
    });
}

function renderText(report: StatusReport, registry: ReturnType<typeof buildRegistry>, now: number): string {
  const { queue, feeds, missing, stale, rejections } = report;
  const parts: string[] = [];
  const states = [...QUEUE_STATES, ...RARE_STATES.filter((s) => (queue[s] ?? 0) > 0)];
  const workers = report.workers === null ? '' : `; workers ${report.workers}`;
  parts.push(`queue    ${states.map((s) => `${s} ${queue[s] ?? 0}`).join(', ')}${workers}\n`);
  parts.push(`redis    ${report.redis ?? 'unknown'}\n`);
  const c = report.changes;
  const span = c.oldest === null ? 'empty' : `${c.oldest}-${c.position}`;
  parts.push(
    `changes  position ${c.position} (log ${span}); ${c.readers} reader(s): ${c.streams} stream(s) open, ${c.events} event(s) sent, ${c.dropped} dropped as slow, ${c.waiting} long-poll(s) waiting\n`,
  );
  parts.push(`folders  ${describeFolders(report.folders)}\n\n`);

  // Every feed of the registry: published ones with their age, the others as never published.
  const rows: { filename: string; cells: string[] }[] = feeds.map((f) => ({
    filename: f.filename,
    cells: [
      f.filename,
      f.bookmaker,
      f.generatedAt,
      formatAge(f.ageMs),
      formatAge(f.publishedAgeMs),
      String(f.size),
      f.stale ? `STALE (> ${formatAge(f.staleAfterMs)})` : f.ahead ? `AHEAD ${formatAge(f.aheadMs)}` : 'fresh',
    ],
  }));
  for (const filename of missing) {
    const feed = parseFilename(registry, filename);
    rows.push({ filename, cells: [filename, feed?.bookmaker ?? '', '-', '-', '-', '-', 'never published'] });
  }
  rows.sort((a, b) => (a.filename < b.filename ? -1 : a.filename > b.filename ? 1 : 0));
  if (rows.length === 0) parts.push('no feed in the registry\n');
  else
    parts.push(
      formatTable(
        ['FILENAME', 'BOOKMAKER', 'GENERATED_AT', 'AGE', 'PUBLISHED', 'SIZE', 'STATE'],
        rows.map((r) => r.cells),
      ),
    );
  parts.push(`\n${feeds.length} published, ${stale} stale, ${missing.length} of the registry's ${registry.filenames.length} never published\n`);
  for (const f of feeds.filter((x) => x.ahead))
    parts.push(
      `AHEAD: ${f.filename}'s generated_at ${f.generatedAt} is ${formatAge(f.aheadMs)} ahead of this clock (a publisher's clock running fast?); drops stamped earlier are superseded until then\n`,
    );

  if (rejections.length > 0) {
    parts.push('\nlast rejections\n');
    parts.push(
      formatTable(
        ['RECEIVED', 'ID', 'FILENAME', 'REASON', 'DETAIL'],
        rejections.map((r) => [`${formatAge(now - Date.parse(r.received_at))} ago`, r.id, r.filename, r.reason, oneLine(r.detail, 100)]),
      ),
    );
    parts.push('(oddsfiles rejected list for all of them, oddsfiles rejected retry ID to send one back)\n');
  } else {
    parts.push('\nno rejections recorded\n');
  }
  if (report.superseded.length > 0) {
    parts.push('\nlast superseded (a drop older than the published version)\n');
    parts.push(
      formatTable(
        ['RECEIVED', 'FILENAME', 'GENERATED_AT', 'PUBLISHED GENERATED_AT'],
        report.superseded.map((s) => [`${formatAge(now - Date.parse(s.received_at))} ago`, s.filename, s.generated_at, s.published_generated_at]),
      ),
    );
  }
  return parts.join('');
}

function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
