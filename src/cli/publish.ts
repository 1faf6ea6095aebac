/**
 * `oddsfiles publish FILE...`: each file copied into INBOX_DIR/.processing as a claim and queued
 * as a claim job (once the inbox is known to be the one the running workers watch: inbox-check.ts),
 * then each outcome reported (outcomes.ts, shared with `rejected retry`). With --url, the files go
 * to a running service over HTTPS instead (publish-remote.ts).
 */
import { randomBytes } from 'node:crypto';
import { copyFile, rename, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Command } from 'commander';
import { UsageError } from '../errors.js';
import { claimPath, ensureInbox, newClaimId, processingDir } from '../ingest/drop-folder/inbox.js';
import type { CliContext } from './context.js';
import { checkInboxWatched } from './inbox-check.js';
import { awaitOutcomes, openOutcomeEvents, parseTimeout, reportOutcomes, withWaitOptions, type Submitted, type WaitOptions } from './outcomes.js';
import { KEY_ENV, publishRemote } from './publish-remote.js';
import { ifExists } from '../missing.js';

interface PublishOptions extends WaitOptions {
  url?: string;
  key?: string;
  dryRun?: boolean;
}

export function registerPublishCommand(program: Command, ctx: CliContext): void {
  withWaitOptions(
    program
      .command('publish')
      .description('submit files through the same pipeline as the drop folder, and report each outcome')
      .argument('<files...>', 'files named like feeds (site_live_<bookmaker>_<sport>.json ...)'),
  )
    .option('--url <url>', 'publish to a running service over HTTPS (PUT /v1/data/{filename}) instead of through the inbox')
    .option('--key <key>', `with --url: a publisher key (default: $${KEY_ENV})`)
    .option('--dry-run', 'with --url: validate only, publish nothing')
    .action(async (files: string[], opts: PublishOptions) => {
      const timeoutMs = parseTimeout(opts);
      // A PUT is answered once its file is settled: there is nothing to return early from.
      if (opts.url !== undefined && opts.wait === false)
        throw new UsageError('--no-wait does not go with --url: a PUT is answered once its file is published or rejected');
      if (opts.url !== undefined) return publishRemote(ctx, files, { url: opts.url, key: opts.key, dryRun: opts.dryRun, json: opts.json, timeoutMs });
      if (opts.key !== undefined || opts.dryRun) throw new UsageError('--key and --dry-run go with --url');
      for (const f of files) {
        const st = await ifExists(stat(f));
        if (!st?.isFile()) throw new UsageError(`not a readable file: ${f}`);
      }
      const config = ctx.config();
      // Before any file is copied: refused when the running workers watch another inbox.
      await checkInboxWatched(ctx);
      // Loaded by the command that needs them, not by every process that builds the CLI.
      const [{ SingleBar, Presets }, { createIngestQueue, enqueueClaim }] = await Promise.all([import('cli-progress'), import('../ingest/queue.js')]);
      const queue = createIngestQueue(await ctx.redis(), config.redis.prefix);
      const bar =
        files.length >= 10 && (ctx.io.stderr as NodeJS.WriteStream).isTTY
          ? new SingleBar({ stream: ctx.io.stderr, format: 'publishing [{bar}] {value}/{total} {filename}' }, Presets.shades_classic)
          : undefined;
      let events: Awaited<ReturnType<typeof openOutcomeEvents>> = undefined;
      try {
        events = await openOutcomeEvents(ctx, opts);
        await ensureInbox(config.inboxDir);
        const submitted: Submitted[] = [];
        bar?.start(files.length, 0, { filename: '' });
        for (const file of files) {
          const name = basename(file);
          const claimId = newClaimId();
          const tmp = join(processingDir(config.inboxDir), `.publish-${randomBytes(6).toString('hex')}.tmp`);
          const claim = claimPath(config.inboxDir, claimId, name);
          await copyFile(file, tmp);
          await rename(tmp, claim);
          submitted.push({ fields: { file }, claim, job: await enqueueClaim(queue, claimId, name, Date.now()) });
          if (!opts.wait) bar?.increment({ filename: name });
        }
        const outcomes = await awaitOutcomes(ctx, submitted, events, timeoutMs, (s) => bar?.increment({ filename: basename(s.fields.file!) }));
        bar?.stop();
        reportOutcomes(ctx, submitted, outcomes, opts.json);
      } finally {
        bar?.stop();
        await events?.close();
        await queue.close();
      }
    });
}
