/**
 * `oddsfiles rejected list` and `rejected retry`: the drops REJECTED_DIR keeps, and sending them
 * back through the pipeline as claims in INBOX_DIR/.processing (once the inbox is known to be the
 * one the running workers watch: inbox-check.ts).
 */
import { mkdir, readdir, rename, rm, copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Command } from 'commander';
import { NotFoundError, UsageError } from '../errors.js';
import { claimPath, ensureInbox, newClaimId } from '../ingest/inbox.js';
import { listRejections, readRejection, type RejectionRecord } from '../ingest/rejected.js';
import type { CliContext } from './context.js';
import { checkInboxWatched } from './inbox-check.js';
import { formatTable } from './table.js';

export function registerRejectedCommands(program: Command, ctx: CliContext): void {
  const rejected = program.command('rejected').description('rejected drops: why, and sending them again');
  rejected
    .command('list')
    .description('list rejected drops with their reasons')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      const records = await listRejections(ctx.config().rejectedDir);
      if (opts.json) {
        ctx.io.stdout.write(`${JSON.stringify(records, null, 2)}\n`);
        return;
      }
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
  rejected
    .command('retry')
    .description('send rejected drops back through the pipeline (after fixing the registry or the clock)')
    .argument('[id]', 'the rejected drop to retry')
    .option('--all', 'retry every rejected drop')
    .action(async (id: string | undefined, opts: { all?: boolean }) => {
      if (Boolean(id) === Boolean(opts.all)) throw new UsageError('give one rejected drop ID or --all');
      const config = ctx.config();
      const records = opts.all ? await listRejections(config.rejectedDir) : [await readRejection(config.rejectedDir, id!)];
      if (!opts.all && !records[0]) throw new NotFoundError(`no rejected drop with id ${id}`);
      if (records.length === 0) return;
      // Before any file leaves REJECTED_DIR: refused when the running workers watch another inbox.
      await checkInboxWatched(ctx);
      const redis = await ctx.redis();
      const { createIngestQueue, enqueueClaim } = await import('../ingest/queue.js');
      const queue = createIngestQueue(redis, config.redis.prefix);
      try {
        await ensureInbox(config.inboxDir);
        for (const r of records as RejectionRecord[]) {
          const claimId = await requeue(config.rejectedDir, config.inboxDir, r);
          // Its original time of receipt, not now: it stamps a missing generated_at (so an old drop
          // retried after newer ones cannot pass for the newest) and measures the lag.
          const receivedAt = Date.parse(r.received_at);
          await enqueueClaim(queue, claimId, r.filename, Number.isFinite(receivedAt) ? receivedAt : Date.now());
          ctx.io.stdout.write(`${r.id}\t${r.filename}\tqueued again\n`);
        }
      } finally {
        await queue.close();
      }
    });
}

/** Move the rejected file into .processing as a new claim, then drop its rejected folder. */
async function requeue(rejectedDir: string, inboxDir: string, r: RejectionRecord): Promise<string> {
  const dir = join(rejectedDir, r.id);
  const claimId = newClaimId();
  const target = claimPath(inboxDir, claimId, r.filename);
  const source = join(dir, r.filename);
  try {
    await rename(source, target);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
    await copyFile(source, `${target}.part`);
    await rename(`${target}.part`, target);
  }
  const left = await readdir(dir).catch(() => []);
  if (left.every((n) => n === 'reason.json')) await rm(dir, { recursive: true, force: true });
  else await mkdir(dir, { recursive: true });
  return claimId;
}
