/**
 * `oddsfiles publish FILE...`: each file copied into INBOX_DIR/.processing as a claim and queued
 * as a claim job (once the inbox is known to be the one the running workers watch: inbox-check.ts),
 * then each outcome reported. A job that ends `gone` with its claim still there was never seen by
 * a worker: a failure.
 */
import { randomBytes } from 'node:crypto';
import { copyFile, lstat, rename, rm, stat } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import type { Job } from 'bullmq';
import type { Command } from 'commander';
import { UsageError } from '../errors.js';
import { claimPath, ensureInbox, newClaimId, processingDir } from '../ingest/inbox.js';
import type { IngestJobData, IngestResult } from '../ingest/queue.js';
import { INGEST_QUEUE } from '../redis/keys.js';
import { createRedis } from '../redis/connect.js';
import { parseDuration } from '../duration.js';
import type { CliContext } from './context.js';
import { checkInboxWatched } from './inbox-check.js';
import { KEY_ENV, publishRemote } from './publish-remote.js';

interface PublishResult {
  file: string;
  outcome: string;
  reason?: string;
  detail?: string;
  /** Counts as a failure (exit 1) whatever its outcome. */
  failed?: boolean;
}

interface PublishOptions {
  wait: boolean;
  timeout: string;
  json?: boolean;
  url?: string;
  key?: string;
  dryRun?: boolean;
}

export function registerPublishCommand(program: Command, ctx: CliContext): void {
  program
    .command('publish')
    .description('submit files through the same pipeline as the drop folder, and report each outcome')
    .argument('<files...>', 'files named like feeds (site_live_<bookmaker>_<sport>.json ...)')
    .option('--no-wait', 'queue and return at once, without waiting for the outcomes')
    .option('--timeout <duration>', 'how long to wait for the outcomes', '60s')
    .option('--json', 'machine-readable output')
    .option('--url <url>', 'publish to a running service over HTTPS (PUT /v1/data/{filename}) instead of through the inbox')
    .option('--key <key>', `with --url: a publisher key (default: $${KEY_ENV})`)
    .option('--dry-run', 'with --url: validate only, publish nothing')
    .action(async (files: string[], opts: PublishOptions) => {
      const timeoutMs = parseDuration(opts.timeout);
      if (timeoutMs === undefined) throw new UsageError(`--timeout takes a duration such as 30s, not "${opts.timeout}"`);
      if (opts.url !== undefined) return publishRemote(ctx, files, { url: opts.url, key: opts.key, dryRun: opts.dryRun, json: opts.json, timeoutMs });
      if (opts.key !== undefined || opts.dryRun) throw new UsageError('--key and --dry-run go with --url');
      for (const f of files) {
        const st = await stat(f).catch(() => undefined);
        if (!st?.isFile()) throw new UsageError(`not a readable file: ${f}`);
      }
      const config = ctx.config();
      // Before any file is copied: refused when the running workers watch another inbox.
      await checkInboxWatched(ctx);
      const url = await ctx.redisUrl();
      // Loaded by the command that needs them, not by every process that builds the CLI.
      const [{ QueueEvents }, { SingleBar, Presets }, { createIngestQueue, enqueueClaim }] = await Promise.all([
        import('bullmq'),
        import('cli-progress'),
        import('../ingest/queue.js'),
      ]);
      const queue = createIngestQueue(await ctx.redis(), config.redis.prefix);
      const events = opts.wait
        ? new QueueEvents(INGEST_QUEUE, { connection: createRedis(url, 'worker', 'oddsfiles-cli-events'), prefix: config.redis.prefix })
        : undefined;
      const bar =
        files.length >= 10 && (ctx.io.stderr as NodeJS.WriteStream).isTTY
          ? new SingleBar({ stream: ctx.io.stderr, format: 'publishing [{bar}] {value}/{total} {filename}' }, Presets.shades_classic)
          : undefined;
      try {
        await events?.waitUntilReady();
        await ensureInbox(config.inboxDir);
        const jobs: { file: string; claim: string; job: Job<IngestJobData, IngestResult> }[] = [];
        bar?.start(files.length, 0, { filename: '' });
        for (const file of files) {
          const name = basename(file);
          const claimId = newClaimId();
          const tmp = join(processingDir(config.inboxDir), `.publish-${randomBytes(6).toString('hex')}.tmp`);
          const claim = claimPath(config.inboxDir, claimId, name);
          await copyFile(file, tmp);
          await rename(tmp, claim);
          jobs.push({ file, claim, job: await enqueueClaim(queue, claimId, name, Date.now()) });
          if (!opts.wait) bar?.increment({ filename: name });
        }
        const results: PublishResult[] = [];
        for (const { file, claim, job } of jobs) {
          if (!events) {
            results.push({ file, outcome: 'queued' });
            continue;
          }
          try {
            const r = await job.waitUntilFinished(events, timeoutMs);
            if (r.outcome === 'gone') results.push(await settleGone(file, claim, config.inboxDir));
            else results.push(r.reason !== undefined ? { file, outcome: r.outcome, reason: r.reason, detail: r.detail ?? '' } : { file, outcome: r.outcome });
          } catch (err) {
            // The job failed for good, or its outcome did not come in time.
            results.push({ file, outcome: 'unknown', detail: (err as Error).message });
          }
          bar?.increment({ filename: basename(file) });
        }
        bar?.stop();
        if (opts.json)
          ctx.io.stdout.write(
            `${JSON.stringify(
              results.map(({ failed: _failed, ...r }) => r),
              null,
              2,
            )}\n`,
          );
        else
          for (const r of results) ctx.io.stdout.write(`${r.file}\t${r.outcome}${r.reason ? `\t${r.reason}: ${r.detail}` : r.detail ? `\t${r.detail}` : ''}\n`);
        if (results.some((r) => r.outcome === 'rejected' || r.outcome === 'unknown' || r.failed)) process.exitCode = 1;
      } finally {
        bar?.stop();
        await events?.close();
        await queue.close();
      }
    });
}

/**
 * A claim job that ended `gone`. Its claim still where this command put it: no worker could see it
 * (they watch another inbox): a failure, and the copy is removed (FILE itself is untouched). Its
 * claim no longer there: an earlier attempt of the job settled it.
 */
async function settleGone(file: string, claim: string, inboxDir: string): Promise<PublishResult> {
  const present = await lstat(claim).then(
    () => true,
    () => false,
  );
  if (!present) return { file, outcome: 'gone', detail: 'settled by an earlier attempt of its job' };
  await rm(claim, { force: true });
  return {
    file,
    outcome: 'gone',
    detail: `no worker found its copy in ${resolve(inboxDir)}/.processing: the workers watch another inbox (or cannot see this one); the copy was removed, the file is untouched`,
    failed: true,
  };
}
