/**
 * `oddsfiles publish --url https://host FILE...`: each file sent with PUT /v1/data/{filename} to a
 * running service, with a publisher key (`--key`, or ODDSFILES_KEY in the environment so it stays
 * off the command line), one after the other, each outcome reported as the local `publish` reports
 * it: published, unchanged, superseded, rejected (reason: detail), unknown (queued, not settled in
 * time). Exit 1 when any file is rejected, unknown or failed. A refusal for load (503) or a lost
 * connection is tried again twice (a PUT of the same bytes is idempotent). `--dry-run` validates
 * without publishing.
 */
import { readFile, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { UsageError } from '../errors.js';
import type { CliContext } from './context.js';
import { ifExists } from '../missing.js';

export const KEY_ENV = 'ODDSFILES_KEY';

export interface RemotePublishOptions {
  readonly url: string;
  readonly key?: string | undefined;
  readonly dryRun?: boolean | undefined;
  readonly json?: boolean | undefined;
  /** Longest wait for one answer, ms. */
  readonly timeoutMs: number;
}

interface RemoteResult {
  file: string;
  outcome: string;
  status?: number;
  reason?: string;
  detail?: string;
  etag?: string;
  generated_at?: string;
  /** Superseded: the generated_at of the published version that won (as the local publish says). */
  publishedGeneratedAt?: string;
  /** Rejected: its folder in the service's REJECTED_DIR. */
  rejectionId?: string;
  would?: string;
}

const FAILED = new Set(['rejected', 'unknown', 'failed']);
const ATTEMPTS = 3;

export async function publishRemote(ctx: CliContext, files: readonly string[], opts: RemotePublishOptions): Promise<void> {
  const key = opts.key ?? ctx.env[KEY_ENV];
  if (!key) throw new UsageError(`give a publisher key with --key or in ${KEY_ENV}`);
  let base: URL;
  try {
    base = new URL(opts.url);
  } catch {
    throw new UsageError(`--url takes the service's address, such as https://odds.example.com, not "${opts.url}"`);
  }
  if (base.protocol !== 'https:' && base.protocol !== 'http:') throw new UsageError(`--url must be https:// (or http://), not "${opts.url}"`);
  for (const f of files) {
    const st = await ifExists(stat(f));
    if (!st?.isFile()) throw new UsageError(`not a readable file: ${f}`);
  }
  const results: RemoteResult[] = [];
  for (const file of files) {
    const name = basename(file);
    const target = new URL(`/v1/data/${encodeURIComponent(name)}${opts.dryRun ? '?dry_run=1' : ''}`, base);
    results.push(await putOne(file, target, key, await readFile(file), opts.timeoutMs));
  }
  if (opts.json) ctx.io.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  else for (const r of results) ctx.io.stdout.write(`${r.file}\t${describe(r)}\n`);
  if (results.some((r) => FAILED.has(r.outcome))) process.exitCode = 1;
}

async function putOne(file: string, target: URL, key: string, bytes: Buffer, timeoutMs: number): Promise<RemoteResult> {
  let last: RemoteResult = { file, outcome: 'failed' };
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    let res: Response;
    try {
      res = await fetch(target, {
        method: 'PUT',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: bytes,
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      const e = err as Error & { cause?: { message?: string } };
      last = { file, outcome: 'failed', detail: e.cause?.message ?? e.message };
      if (e.name === 'TimeoutError')
        return { ...last, outcome: 'unknown', detail: `timed out: no answer within ${timeoutMs / 1000} s; sending it again is safe` };
      await pause(attempt);
      continue;
    }
    const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    last = resultOf(file, res.status, body);
    if (res.status !== 503) return last;
    await pause(attempt, Number(res.headers.get('retry-after')));
  }
  return last;
}

function resultOf(file: string, status: number, body: Record<string, unknown>): RemoteResult {
  const str = (k: string) => (typeof body[k] === 'string' ? (body[k] as string) : undefined);
  const outcome = str('outcome');
  const known = outcome && (status < 300 || status === 409 || status === 422 || status === 504);
  // Not settled in time (504): still queued, as the local publish's `unknown`.
  const r: RemoteResult = { file, outcome: known ? (status === 504 ? 'unknown' : outcome) : 'failed', status };
  const fields: [keyof RemoteResult, string | undefined][] = [
    ['reason', str('reason')],
    ['detail', status >= 400 ? str('detail') : undefined],
    ['etag', str('etag') ?? str('published_etag')],
    ['generated_at', str('generated_at')],
    ['publishedGeneratedAt', str('published_generated_at')],
    ['rejectionId', str('rejection_id')],
    ['would', str('would')],
  ];
  for (const [k, v] of fields) if (v !== undefined) (r as unknown as Record<string, string>)[k] = v;
  if (!known && r.detail === undefined) r.detail = `HTTP ${status}`;
  return r;
}

function describe(r: RemoteResult): string {
  if (r.outcome === 'valid') return `valid (dry run: would be ${r.would ?? 'published'})`;
  if (r.outcome === 'published' || r.outcome === 'unchanged') return `${r.outcome}\tgenerated_at ${r.generated_at ?? '?'}`;
  if (r.outcome === 'superseded') return `superseded\tgenerated_at ${r.generated_at ?? '?'} is not newer than the published ${r.publishedGeneratedAt ?? '?'}`;
  if (r.reason) return `${r.outcome}\t${r.reason}: ${r.detail ?? ''}`;
  return r.detail ? `${r.outcome}\t${r.detail}` : r.outcome;
}

function pause(attempt: number, retryAfterS = NaN): Promise<void> {
  if (attempt >= ATTEMPTS) return Promise.resolve();
  const ms = Number.isFinite(retryAfterS) && retryAfterS > 0 ? Math.min(retryAfterS, 5) * 1000 : 250 * attempt;
  return new Promise((r) => setTimeout(r, ms));
}
