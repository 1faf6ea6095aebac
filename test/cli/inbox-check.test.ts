/**
 * `oddsfiles publish` and `rejected retry` in-process (runCli with a real CliContext) against a
 * BullMQ ingest worker on the real Redis and the real filesystem: refused, with nothing moved,
 * when the running workers watch another inbox than the command's INBOX_DIR; queued with a
 * warning when no worker runs; and a claim job that ends `gone` reported honestly: a failure
 * (the command's copy removed) when no worker could see the claim, not one when an earlier
 * attempt settled it. The publish step is a recording stand-in: the worker's dependency.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createCliContext } from '../../src/cli/context.js';
import { runCli } from '../../src/cli/program.js';
import { ensureInbox, newClaimId, processingDir, type Claim } from '../../src/ingest/drop-folder/inbox.js';
import { ensureInboxMarker, startInboxRegistration, type InboxRegistration } from '../../src/ingest/drop-folder/inbox-marker.js';
import type { DropResult, Publisher } from '../../src/ingest/publish/publisher-types.js';
import { createIngestQueue, type IngestJobData, type IngestQueue, type IngestResult } from '../../src/ingest/queue.js';
import { listRejections, rejectionId, writeRejection } from '../../src/ingest/rejections/rejected.js';
import { createIngestWorker } from '../../src/ingest/worker.js';
import { createQueueCounts } from '../../src/ops/queue-counts.js';
import { redisKeys } from '../../src/redis/key-names.js';
import { capturingLogger } from '../helpers/log.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/service.js';

const FEED = 'site_live_northwind_soccer.json';
const DOC = JSON.stringify({ bookmaker: 'northwind', sport: 'soccer', events: [] });

describe('publish and rejected retry check the inbox the workers watch', () => {
  const prefixes: string[] = [];
  const dirs: string[] = [];
  const connections: Redis[] = [];
  const queues: IngestQueue[] = [];
  const workers: Worker<IngestJobData, IngestResult>[] = [];
  const registrations: InboxRegistration[] = [];

  afterAll(async () => {
    for (const w of workers) await w.close(true).catch(() => undefined);
    for (const r of registrations) await r.close();
    for (const q of queues) await q.close().catch(() => undefined);
    for (const c of connections) c.disconnect();
    for (const p of prefixes) await dropPrefix(p);
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  const connect = () => {
    const c = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    c.on('error', () => undefined);
    connections.push(c);
    return c;
  };

  const setup = async () => {
    const prefix = uniquePrefix('cli-inbox');
    prefixes.push(prefix);
    const root = await mkdtemp(join(tmpdir(), 'oddsfiles-cli-inbox-'));
    dirs.push(root);
    // The service's inbox (where the workers run) and the command's DATA_DIR: not the same folder.
    const workerInbox = join(root, 'service', 'inbox');
    await ensureInbox(workerInbox);
    const cliData = join(root, 'cli');
    await mkdir(cliData);
    const cliInbox = join(cliData, 'inbox');
    const rejectedDir = join(cliData, 'rejected');
    const file = join(root, FEED);
    await writeFile(file, DOC);
    const env: Record<string, string> = { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix, DATA_DIR: cliData, LOG_LEVEL: 'silent' };
    const queue = createIngestQueue(connect(), prefix);
    queues.push(queue);
    const { log, lines: workerLog } = capturingLogger();
    const calls: Claim[] = [];
    const publish: Publisher = Object.assign(
      async (claim: Claim): Promise<DropResult> => {
        calls.push(claim);
        return { outcome: 'published', filename: claim.name, timings: { total: 0 } };
      },
      { flush: async () => undefined, close: () => undefined },
    );

    /** A worker as the worker role runs one: consuming the queue, its inbox registered. */
    const startWorker = async (inboxDir: string) => {
      registrations.push(await startInboxRegistration({ inboxDir, redis: connect(), keys: redisKeys(prefix), log }));
      const worker = createIngestWorker({ connection: connect(), prefix, inboxDir, concurrency: 1, lockDurationMs: 30_000, publish, log });
      workers.push(worker);
      const counts = createQueueCounts(connect(), prefix);
      await waitFor(async () => (await counts.getWorkersCount()) > 0, 10_000, 'the worker connected');
      return worker;
    };

    const cli = async (args: string[], extraEnv: Record<string, string> = {}) => {
      let stdout = '';
      let stderr = '';
      const sink = (write: (s: string) => void) =>
        new Writable({
          write(chunk: Buffer, _enc, cb) {
            write(chunk.toString('utf8'));
            cb();
          },
        });
      const ctx = createCliContext({ stdout: sink((s) => (stdout += s)), stderr: sink((s) => (stderr += s)) }, { ...env, ...extraEnv }, cliData);
      const saved = process.exitCode;
      process.exitCode = undefined;
      try {
        const code = await runCli(ctx, args, 'test');
        return { code, stdout, stderr };
      } finally {
        // Commands signal failures through process.exitCode: never leak it into the test run.
        process.exitCode = saved;
      }
    };

    const jobCount = async () => {
      const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed');
      return Object.values(counts).reduce((a, b) => a + b, 0);
    };

    return { prefix, root, workerInbox, cliInbox, rejectedDir, file, queue, workerLog, calls, startWorker, cli, jobCount };
  };

  /** The refusal, naming the folder the running workers watch (they registered it). */
  const mismatch = (inbox: string, theirs: string) =>
    `oddsfiles: this command's INBOX_DIR (${inbox}) is not the inbox the running workers watch (they watch ${theirs} on ${hostname()}): run it with the service's environment (INBOX_DIR/DATA_DIR, REDIS_URL, REDIS_PREFIX) on a machine that shares the inbox\n`;

  it('publish is refused, moving nothing, when the running workers watch another inbox; it goes on in theirs', async () => {
    const t = await setup();
    await t.startWorker(t.workerInbox);

    const res = await t.cli(['publish', t.file]);
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    expect(res.stderr).toBe(mismatch(t.cliInbox, t.workerInbox));
    expect(existsSync(t.cliInbox)).toBe(false);
    expect(await t.jobCount()).toBe(0);
    expect(await readFile(t.file, 'utf8')).toBe(DOC);

    // A marker nobody registers (a worker that watched this folder once) changes nothing.
    await mkdir(t.cliInbox);
    await ensureInboxMarker(t.cliInbox);
    const again = await t.cli(['publish', t.file]);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(mismatch(t.cliInbox, t.workerInbox));
    expect(await readdir(t.cliInbox)).toEqual(['.oddsfiles-inbox']);
    expect(await t.jobCount()).toBe(0);

    // With the service's INBOX_DIR: no warning, published.
    const ok = await t.cli(['publish', t.file], { INBOX_DIR: t.workerInbox });
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    expect(ok.stdout).toBe(`${t.file}\tpublished\n`);
    expect(t.calls.map((c) => c.name)).toEqual([FEED]);
  });

  it('rejected retry (--all or ID) is refused when the running workers watch another inbox, and REJECTED_DIR stays whole', async () => {
    const t = await setup();
    for (const [i, name] of [FEED, 'site_live_redstone_soccer.json'].entries()) {
      const source = join(t.root, `source-${i}`);
      await writeFile(source, `doc ${i}`);
      const claimId = newClaimId();
      await writeRejection(
        t.rejectedDir,
        { id: rejectionId(new Date(), claimId), filename: name, reason: 'schema', detail: 'events: must be array', received_at: new Date().toISOString() },
        source,
      );
    }
    const before = await listRejections(t.rejectedDir);
    expect(before).toHaveLength(2);
    await t.startWorker(t.workerInbox);

    for (const args of [
      ['rejected', 'retry', '--all'],
      ['rejected', 'retry', before[0]!.id],
    ]) {
      const res = await t.cli(args);
      expect(res.code, args.join(' ')).toBe(1);
      expect(res.stdout).toBe('');
      expect(res.stderr).toBe(mismatch(t.cliInbox, t.workerInbox));
    }
    expect(await listRejections(t.rejectedDir)).toEqual(before);
    for (const r of before) expect(await readFile(join(t.rejectedDir, r.id, r.filename), 'utf8')).toMatch(/^doc \d$/);
    expect(existsSync(t.cliInbox)).toBe(false);
    expect(await t.jobCount()).toBe(0);
  });

  it('with no worker running, publish warns and queues', async () => {
    const t = await setup();
    const res = await t.cli(['publish', '--no-wait', t.file]);
    expect(res.code).toBe(0);
    expect(res.stderr).toBe(`warning: no worker is running: the files wait in the queue until a worker that watches ${t.cliInbox} starts\n`);
    expect(res.stdout).toBe(`${t.file}\tqueued\n`);
    const [job] = await t.queue.getJobs(['waiting']);
    expect(job?.name).toBe('claim');
    const claims = await readdir(processingDir(t.cliInbox));
    expect(claims).toEqual([`${job!.data.claimId}--${FEED}`]);
    expect(await readFile(join(processingDir(t.cliInbox), claims[0]!), 'utf8')).toBe(DOC);
  });

  it('publish reports a claim no worker could see as gone, exits 1 and removes its copy', async () => {
    const t = await setup();
    // No worker when the command checks; then one starts that watches another inbox.
    const running = t.cli(['publish', '--json', '--timeout', '20s', t.file]);
    await waitFor(async () => (await t.queue.getWaitingCount()) === 1, 10_000, 'the claim job queued');
    await t.startWorker(t.workerInbox);
    const res = await running;
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/^warning: no worker is running/);
    const results = JSON.parse(res.stdout) as Record<string, string>[];
    expect(results).toHaveLength(1);
    expect(Object.keys(results[0]!).sort()).toEqual(['detail', 'file', 'outcome']);
    expect(results[0]).toMatchObject({ file: t.file, outcome: 'gone' });
    expect(results[0]!.detail).toContain(`no worker found its copy in ${t.cliInbox}/.processing`);
    expect(await readdir(processingDir(t.cliInbox))).toEqual([]);
    expect(await readFile(t.file, 'utf8')).toBe(DOC);
    expect(t.calls).toEqual([]);
    expect(t.workerLog.find((l) => l.outcome === 'gone')).toMatchObject({ level: 40, inbox: t.workerInbox, filename: FEED });
  });

  it('publish reports a claim settled by an earlier attempt as gone without failing', async () => {
    const t = await setup();
    const running = t.cli(['publish', '--timeout', '20s', t.file]);
    await waitFor(async () => (await t.queue.getWaitingCount()) === 1, 10_000, 'the claim job queued');
    // What an earlier attempt leaves once it has settled the drop: no claim.
    for (const name of await readdir(processingDir(t.cliInbox))) await rm(join(processingDir(t.cliInbox), name));
    await t.startWorker(t.cliInbox);
    const res = await running;
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(`${t.file}\tgone\tsettled by an earlier attempt of its job\n`);
    expect(t.calls).toEqual([]);
  });
});
