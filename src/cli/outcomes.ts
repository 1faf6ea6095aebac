/**
 * Waiting for claim jobs and reporting their outcomes: the one implementation behind `publish` and
 * `rejected retry`. Options `--no-wait`, `--timeout`, `--json`; one line (or JSON object) per
 * submitted file; exit 1 when any was rejected, failed, gone unseen or left without an outcome.
 *
 * `--timeout` bounds the whole wait (not each job). A job without an outcome by then says what to
 * check: no worker running (or none consuming this Redis and REDIS_PREFIX), or workers too busy;
 * the claim stays queued either way and is published when a worker takes it.
 */
import { lstat, rm } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Job, QueueEvents } from 'bullmq';
import type { Command } from 'commander';
import { formatAge, parseDuration } from '../duration.js';
import { UsageError } from '../errors.js';
import type { IngestJobData, IngestResult } from '../ingest/queue.js';
import { createQueueCounts } from '../ops/queue-counts.js';
import { createRedis } from '../redis/connect.js';
import type { CliContext } from './context.js';

export interface WaitOptions {
  wait: boolean;
  timeout: string;
  json?: boolean;
}

/** The options every command that submits claims takes. */
export function withWaitOptions(command: Command): Command {
  return command
    .option('--no-wait', 'queue and return at once, without waiting for the outcomes')
    .option('--timeout <duration>', 'how long to wait for the outcomes', '60s')
    .option('--json', 'machine-readable output');
}

export function parseTimeout(opts: WaitOptions): number {
  const ms = parseDuration(opts.timeout);
  if (ms === undefined) throw new UsageError(`--timeout takes a duration such as 30s, not "${opts.timeout}"`);
  return ms;
}

/** What a command submitted: the fields it reports (file, or id and filename), its job and claim. */
export interface Submitted {
  readonly fields: Readonly<Record<string, string>>;
  readonly job: Job<IngestJobData, IngestResult>;
  /** The claim's path in INBOX_DIR/.processing. */
  readonly claim: string;
}

export interface Outcome {
  readonly outcome: string;
  readonly reason?: string;
  readonly detail?: string;
  /** A rejection's folder in REJECTED_DIR. */
  readonly rejectionId?: string;
  /** Published or unchanged: the published version's generated_at (the document's own, or stamped on receipt), as `--url` reports it. */
  readonly generated_at?: string;
  /** Superseded: the generated_at of the published version that won. */
  readonly publishedGeneratedAt?: string;
  /** Counts as a failure (exit 1) whatever its outcome. */
  readonly failed?: boolean;
}

const FAILING = new Set(['rejected', 'failed', 'unknown']);

/** The queue's events, opened before anything is queued (so no outcome is missed); undefined with --no-wait. */
export async function openOutcomeEvents(ctx: CliContext, opts: WaitOptions): Promise<QueueEvents | undefined> {
  if (!opts.wait) return undefined;
  const { openQueueEvents } = await import('../ingest/queue.js');
  return openQueueEvents(createRedis(await ctx.redisUrl(), 'worker', 'oddsfiles-cli-events'), ctx.config().redis.prefix);
}

/** Each submission's outcome, in order; `queued` for all without events (--no-wait). */
export async function awaitOutcomes(
  ctx: CliContext,
  submitted: readonly Submitted[],
  events: QueueEvents | undefined,
  timeoutMs: number,
  onEach?: (s: Submitted) => void,
): Promise<Outcome[]> {
  const out: Outcome[] = [];
  const deadline = Date.now() + timeoutMs;
  let timedOut: string | undefined;
  for (const s of submitted) {
    if (!events) {
      out.push({ outcome: 'queued' });
      continue;
    }
    out.push(await outcomeOf(ctx, s, events, deadline, async () => (timedOut ??= await timeoutDetail(ctx, timeoutMs))));
    onEach?.(s);
  }
  return out;
}

async function outcomeOf(ctx: CliContext, s: Submitted, events: QueueEvents, deadline: number, onTimeout: () => Promise<string>): Promise<Outcome> {
  try {
    const r = await s.job.waitUntilFinished(events, Math.max(250, deadline - Date.now()));
    if (r.outcome === 'gone') return settleGone(s.claim, ctx.config().inboxDir);
    // Superseded: which published generated_at won, beside the drop's own.
    if (r.outcome === 'superseded' && r.publishedGeneratedAt !== undefined)
      return {
        outcome: r.outcome,
        detail: `generated_at ${r.generatedAt ?? '?'} is not newer than the published ${r.publishedGeneratedAt}`,
        publishedGeneratedAt: r.publishedGeneratedAt,
      };
    // The published version's: for an unchanged drop without generated_at, not the stamp it got on receipt.
    const at = r.current?.generatedAt ?? r.generatedAt;
    if ((r.outcome === 'published' || r.outcome === 'unchanged') && at !== undefined) return { outcome: r.outcome, generated_at: at };
    if (r.reason === undefined) return { outcome: r.outcome };
    return { outcome: r.outcome, reason: r.reason, detail: r.detail ?? '', ...(r.rejectionId ? { rejectionId: r.rejectionId } : {}) };
  } catch (err) {
    // Failed for good (retries used up, stalled too often), or no outcome in time: the job's state says which.
    const state = await s.job.getState().catch(() => 'unknown');
    // A failed job's wait rejects with its failedReason.
    if (state === 'failed') return { outcome: 'failed', detail: (err as Error).message };
    return { outcome: 'unknown', detail: await onTimeout() };
  }
}

/** Why nothing came in time, and what to check. */
async function timeoutDetail(ctx: CliContext, timeoutMs: number): Promise<string> {
  const config = ctx.config();
  const workers = await createQueueCounts(await ctx.redis(), config.redis.prefix)
    .getWorkersCount()
    .catch(() => null);
  const within = formatAge(timeoutMs);
  const stays = 'the file stays queued and will be published when a worker takes it';
  if (workers === 0)
    return `timed out: no worker settled it within ${within}: is \`oddsfiles start\` (worker role) running against this Redis/REDIS_PREFIX (${config.redis.prefix})? ${stays}`;
  return `timed out: no outcome within ${within}${workers === null ? '' : ` though ${workers} worker(s) are connected`} (busy, or retrying a failing store or Redis: see their log); ${stays}`;
}

/**
 * A claim job that ended `gone`. Its claim still where the command put it: no worker could see it
 * (they watch another inbox): a failure, and the copy is removed (the command's own file is
 * untouched). Its claim no longer there: an earlier attempt of the job settled it.
 */
async function settleGone(claim: string, inboxDir: string): Promise<Outcome> {
  const present = await lstat(claim).then(
    () => true,
    () => false,
  );
  if (!present) return { outcome: 'gone', detail: 'settled by an earlier attempt of its job' };
  await rm(claim, { force: true });
  return {
    outcome: 'gone',
    detail: `no worker found its copy in ${resolve(inboxDir)}/.processing: the workers watch another inbox (or cannot see this one); the copy was removed, the file is untouched`,
    failed: true,
  };
}

/**
 * Each outcome, one line (tab-separated) or JSON object per submission; exit 1 when any failed.
 * A rejected line ends with the id its rejection is kept under (`id <id>`, or with
 * `newRejectionId` `new id <id>`: `rejected retry`, whose line starts with the old one).
 */
export function reportOutcomes(
  ctx: CliContext,
  submitted: readonly Submitted[],
  outcomes: readonly Outcome[],
  json: boolean | undefined,
  { newRejectionId = false }: { newRejectionId?: boolean } = {},
): void {
  const rows = submitted.map((s, i) => {
    const { failed: _failed, ...o } = outcomes[i]!;
    return { ...s.fields, ...o };
  });
  if (json) ctx.io.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
  else
    for (const [i, s] of submitted.entries()) {
      const o = outcomes[i]!;
      const tail =
        (o.reason ? `\t${o.reason}: ${o.detail}` : o.detail ? `\t${o.detail}` : o.generated_at ? `\tgenerated_at ${o.generated_at}` : '') +
        (o.rejectionId ? `\t${newRejectionId ? 'new id' : 'id'} ${o.rejectionId}` : '');
      ctx.io.stdout.write(`${Object.values(s.fields).join('\t')}\t${o.outcome}${tail}\n`);
    }
  if (outcomes.some((o) => FAILING.has(o.outcome) || o.failed)) process.exitCode = 1;
}
