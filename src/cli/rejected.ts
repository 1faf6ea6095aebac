/**
 * `oddsfiles rejected list`, `retry` and `purge`: the drops REJECTED_DIR keeps, sending them back
 * through the pipeline as claims in INBOX_DIR/.processing (once the inbox is known to be the one
 * the running workers watch: inbox-check.ts) and reporting their outcomes as `publish` does
 * (outcomes.ts), and removing old ones. A drop that leaves REJECTED_DIR leaves the rejection log
 * too, so `status` stops listing it.
 */
import { mkdir, readdir, rename, rm, copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Command } from 'commander';
import { parseDuration } from '../duration.js';
import { NotFoundError, UsageError } from '../errors.js';
import { claimPath, ensureInbox, newClaimId } from '../ingest/drop-folder/inbox.js';
import { listRejections, readRejection, type RejectionRecord } from '../ingest/rejections/rejected.js';
import { purgeRejections } from '../ingest/rejections/rejected-purge.js';
import { createRejectionLog } from '../ingest/rejections/rejection-log.js';
import type { CliContext } from './context.js';
import { checkInboxWatched, refuseOtherInbox } from './inbox-check.js';
import { awaitOutcomes, openOutcomeEvents, parseTimeout, reportOutcomes, withWaitOptions, type Submitted, type WaitOptions } from './outcomes.js';
import { formatTable } from './table.js';
import { ifExists } from '../missing.js';

export function registerRejectedCommands(program: Command, ctx: CliContext): void {
  const rejected = program.command('rejected').description('rejected drops: why, sending them again, removing old ones');
  rejected
    .command('list')
    .description('list rejected drops with their reasons')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      const { rejectedDir } = ctx.config();
      // REJECTED_DIR comes from the same environment as INBOX_DIR: refused when that is not the workers' inbox.
      await refuseOtherInbox(ctx);
      const records = await listRejections(rejectedDir);
      if (opts.json) {
        ctx.io.stdout.write(`${JSON.stringify(records, null, 2)}\n`);
        return;
      }
      ctx.io.stdout.write(`REJECTED_DIR ${rejectedDir}\n`);
      if (records.length === 0) {
        ctx.io.stdout.write('no rejected drops\n');
        return;
      }
      ctx.io.stdout.write(
        formatTable(
          ['ID', 'FILENAME', 'REASON', 'RECEIVED', 'DETAIL'],
          records.map((r) => [r.id, r.filename, r.reason, r.received_at, r.detail]),
        ),
      );
    });
  withWaitOptions(
    rejected
      .command('retry')
      .description('send rejected drops back through the pipeline (after fixing the registry or the clock), and report each outcome')
      .argument('[id]', 'the rejected drop to retry')
      .option('--all', 'retry every rejected drop'),
  ).action(async (id: string | undefined, opts: WaitOptions & { all?: boolean }) => {
    if (Boolean(id) === Boolean(opts.all)) throw new UsageError('give one rejected drop ID or --all');
    const timeoutMs = parseTimeout(opts);
    const config = ctx.config();
    const records = opts.all ? await listRejections(config.rejectedDir) : [await readRejection(config.rejectedDir, id!)];
    if (!opts.all && !records[0]) throw new NotFoundError(`no rejected drop with id ${id} in ${config.rejectedDir}`);
    if (records.length === 0) return;
    // Before any file leaves REJECTED_DIR: refused when the running workers watch another inbox.
    await checkInboxWatched(ctx);
    const redis = await ctx.redis();
    const { createIngestQueue, enqueueClaim } = await import('../ingest/queue.js');
    const queue = createIngestQueue(redis, config.redis.prefix);
    const log = createRejectionLog(redis, ctx.keys());
    let events: Awaited<ReturnType<typeof openOutcomeEvents>> = undefined;
    try {
      events = await openOutcomeEvents(ctx, opts);
      await ensureInbox(config.inboxDir);
      const submitted: Submitted[] = [];
      for (const r of records as RejectionRecord[]) {
        const claimId = newClaimId();
        const claim = await requeue(config.rejectedDir, config.inboxDir, r, claimId);
        // Its original time of receipt, not now: it stamps a missing generated_at (so an old drop
        // retried after newer ones cannot pass for the newest) and measures the lag.
        const receivedAt = Date.parse(r.received_at);
        const job = await enqueueClaim(queue, claimId, r.filename, Number.isFinite(receivedAt) ? receivedAt : Date.now());
        // Out of REJECTED_DIR, out of the log: rejected again, it comes back under a new id.
        await log.forget([r.id]);
        submitted.push({ fields: { id: r.id, filename: r.filename }, claim, job });
      }
      reportOutcomes(ctx, submitted, await awaitOutcomes(ctx, submitted, events, timeoutMs), opts.json, { newRejectionId: true });
    } finally {
      await events?.close();
      await queue.close();
    }
  });
  rejected
    .command('purge')
    .description('remove rejected drops older than a duration (workers also do it: ingest.rejected_retention)')
    .requiredOption('--older-than <duration>', 'received longer ago than this, e.g. 7d')
    .option('--dry-run', 'list what would be removed, remove nothing')
    .option('--json', 'machine-readable output')
    .action(async (opts: { olderThan: string; dryRun?: boolean; json?: boolean }) => {
      const ms = parseDuration(opts.olderThan);
      if (ms === undefined) throw new UsageError(`--older-than takes a duration such as 7d, not "${opts.olderThan}"`);
      const { rejectedDir } = ctx.config();
      await refuseOtherInbox(ctx);
      const log = createRejectionLog(await ctx.redis(), ctx.keys());
      const removed = await purgeRejections(rejectedDir, Date.now() - ms, { dryRun: opts.dryRun ?? false, forget: (ids) => log.forget(ids) });
      if (opts.json) {
        ctx.io.stdout.write(`${JSON.stringify({ rejectedDir, dryRun: opts.dryRun ?? false, removed }, null, 2)}\n`);
        return;
      }
      for (const r of removed) ctx.io.stdout.write(`${r.id}\t${r.filename ?? '-'}\t${r.received_at}\n`);
      const verb = opts.dryRun ? 'would remove' : 'removed';
      ctx.io.stdout.write(`${verb} ${removed.length} rejected drop(s) received over ${opts.olderThan} ago from ${rejectedDir}\n`);
    });
}

/** Move the rejected file into .processing as a new claim, then drop its rejected folder; the claim's path. */
async function requeue(rejectedDir: string, inboxDir: string, r: RejectionRecord, claimId: string): Promise<string> {
  const dir = join(rejectedDir, r.id);
  const target = claimPath(inboxDir, claimId, r.filename);
  const source = join(dir, r.filename);
  try {
    await rename(source, target);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
    await copyFile(source, `${target}.part`);
    await rename(`${target}.part`, target);
  }
  const left = (await ifExists(readdir(dir))) ?? [];
  if (left.every((n) => n === 'reason.json')) await rm(dir, { recursive: true, force: true });
  else await mkdir(dir, { recursive: true });
  return target;
}
