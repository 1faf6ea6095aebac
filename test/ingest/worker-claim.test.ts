/**
 * How the ingest worker takes its claim (src/ingest/worker.ts), with BullMQ on the real Redis and
 * the real filesystem: a drop job's first start renames the drop at once; a retried or
 * stalled-and-restarted drop job works on the claim its first run made and never takes the newer
 * drop waiting in the inbox under the same name; a claim job works on its given claim only. The
 * publish step is a recording stand-in (the worker's dependency), so each test sees exactly which
 * bytes each run read.
 */
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { Worker } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { claimPath, dropClaimId, ensureInbox, newClaimId, processingDir, type Claim } from '../../src/ingest/drop-folder/inbox.js';
import type { DropResult, Publisher } from '../../src/ingest/publish/publisher-types.js';
import { createIngestQueue, enqueueClaim, enqueueDrop, type IngestJobData, type IngestQueue, type IngestResult } from '../../src/ingest/queue.js';
import { recoverClaims } from '../../src/ingest/drop-folder/recovery.js';
import { createIngestWorker } from '../../src/ingest/worker.js';
import { dropFile } from '../helpers/faults.js';
import { TEST_REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/service.js';
import { capturingLogger } from '../helpers/log.js';

interface Call {
  readonly claimId: string;
  readonly path: string;
  readonly content: string;
}

describe('the ingest worker takes its claim', () => {
  const prefixes: string[] = [];
  const connections: Redis[] = [];
  const workers: Worker<IngestJobData, IngestResult>[] = [];
  const queues: IngestQueue[] = [];
  const dirs: string[] = [];
  afterAll(async () => {
    for (const w of workers) await w.close(true).catch(() => undefined);
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
    const prefix = uniquePrefix('worker-claim');
    prefixes.push(prefix);
    const inbox = await mkdtemp(join(tmpdir(), 'oddsfiles-worker-claim-'));
    dirs.push(inbox);
    await ensureInbox(inbox);
    const queue = createIngestQueue(connect(), prefix);
    queues.push(queue);
    const { log, lines: logLines } = capturingLogger();
    const calls: Call[] = [];
    /** What the stand-in publish step does after recording a call (default: settle as published). */
    let behaviour: (claim: Claim, call: number) => Promise<void> = async () => undefined;
    const publish: Publisher = Object.assign(
      async (claim: Claim): Promise<DropResult> => {
        calls.push({ claimId: claim.claimId, path: claim.path, content: await readFile(claim.path, 'utf8') });
        await behaviour(claim, calls.length);
        return { outcome: 'published', filename: claim.name, timings: { total: 0 } };
      },
      { flush: async () => undefined, close: () => undefined },
    );
    const startWorker = (lockDurationMs = 30_000) => {
      const worker = createIngestWorker({ connection: connect(), prefix, inboxDir: inbox, concurrency: 2, lockDurationMs, publish, log });
      workers.push(worker);
      return worker;
    };
    const completed = (jobId: string) => waitFor(async () => (await queue.getJobState(jobId)) === 'completed', 15_000, `job ${jobId} completed`);
    const lastJobId = async () => {
      const jobs = await queue.getJobs(['waiting', 'active', 'delayed', 'completed', 'failed']);
      return jobs.map((j) => j.id!).sort((a, b) => Number(b) - Number(a))[0]!;
    };
    /** The claim id a drop job's worker uses: its id and creation time. */
    const claimIdOf = async (jobId: string) => dropClaimId(jobId, (await queue.getJob(jobId))!.timestamp);
    return {
      prefix,
      inbox,
      queue,
      log,
      claimIdOf,
      calls,
      logLines,
      startWorker,
      completed,
      lastJobId,
      setBehaviour: (b: typeof behaviour) => {
        behaviour = b;
      },
    };
  };

  it("claims a drop at once on a drop job's first start, and logs the claim's time", async () => {
    const t = await setup();
    await dropFile(t.inbox, 'site_live_a.json', Buffer.from('v1'));
    await enqueueDrop(t.queue, 'site_live_a.json', Date.now());
    const jobId = await t.lastJobId();
    t.startWorker();
    await t.completed(jobId);
    const claimId = await t.claimIdOf(jobId);
    expect(claimId).toMatch(new RegExp(`^d${jobId}-[0-9a-z]+$`));
    expect(t.calls).toEqual([{ claimId, path: claimPath(t.inbox, claimId, 'site_live_a.json'), content: 'v1' }]);
    expect(await readdir(t.inbox)).toEqual(['.processing']);
    // The job's completion can be seen (through Redis) before the worker has written its line.
    const line = await waitFor(() => t.logLines.find((l) => l.jobId === jobId && l.msg === 'drop published'), 10_000, 'the published line');
    expect(typeof (line.timings as Record<string, number> | undefined)?.claim).toBe('number');
  });

  it('a drop job whose drop is gone settles as gone without publishing', async () => {
    const t = await setup();
    await enqueueDrop(t.queue, 'site_live_missing.json', Date.now());
    const jobId = await t.lastJobId();
    t.startWorker();
    await t.completed(jobId);
    expect(t.calls).toEqual([]);
    expect((await t.queue.getJob(jobId))?.returnvalue).toEqual({ outcome: 'gone', filename: 'site_live_missing.json' });
  });

  it('logs gone: at info for a drop job (already processed), at warn naming its inbox for a claim job', async () => {
    const t = await setup();
    await enqueueDrop(t.queue, 'site_live_gone.json', Date.now());
    const dropJob = await t.lastJobId();
    // A claim made in another folder (a command run with another INBOX_DIR): not in this inbox.
    const claimId = newClaimId();
    const claimJob = await enqueueClaim(t.queue, claimId, 'site_live_gone.json', Date.now());
    t.startWorker();
    await t.completed(dropJob);
    await t.completed(claimJob.id!);
    expect(t.calls).toEqual([]);
    const info = await waitFor(() => t.logLines.find((l) => l.jobId === dropJob && l.outcome === 'gone'), 10_000, 'the drop job gone line');
    expect(info).toMatchObject({ level: 30, msg: 'drop gone', filename: 'site_live_gone.json' });
    const warn = await waitFor(() => t.logLines.find((l) => l.jobId === claimJob.id && l.outcome === 'gone'), 10_000, 'the claim job gone line');
    expect(warn).toMatchObject({ level: 40, filename: 'site_live_gone.json', claimId, inbox: t.inbox });
    expect(warn?.msg).toContain(`not in this worker's inbox ${t.inbox}`);
  });

  it('a retried drop job works on its own claim, never on the newer drop waiting in the inbox', async () => {
    const t = await setup();
    await dropFile(t.inbox, 'site_live_b.json', Buffer.from('v1'));
    // First run: a re-drop lands in the inbox meanwhile, then a transient failure.
    t.setBehaviour(async (_claim, call) => {
      if (call === 1) {
        await dropFile(t.inbox, 'site_live_b.json', Buffer.from('v2'));
        throw new Error('transient: the store is away');
      }
    });
    await enqueueDrop(t.queue, 'site_live_b.json', Date.now());
    const jobId = await t.lastJobId();
    t.startWorker();
    await t.completed(jobId);
    const claimId = await t.claimIdOf(jobId);
    const claim = claimPath(t.inbox, claimId, 'site_live_b.json');
    expect(t.calls).toEqual([
      { claimId, path: claim, content: 'v1' },
      { claimId, path: claim, content: 'v1' },
    ]);
    // The re-drop is untouched, waiting for its own job.
    expect(await readFile(join(t.inbox, 'site_live_b.json'), 'utf8')).toBe('v2');
    expect(await readFile(claim, 'utf8')).toBe('v1');
  });

  it('a drop job restarted after a stall works on its claim, never on the newer drop in the inbox', async () => {
    const t = await setup();
    await dropFile(t.inbox, 'site_live_c.json', Buffer.from('v1'));
    let firstRunStarted = false;
    // The first run hangs for ever (its process "froze"); later runs settle.
    t.setBehaviour(async (_claim, call) => {
      if (call === 1) {
        firstRunStarted = true;
        await new Promise(() => undefined);
      }
    });
    await enqueueDrop(t.queue, 'site_live_c.json', Date.now());
    const jobId = await t.lastJobId();
    const frozen = t.startWorker(1000);
    await waitFor(() => firstRunStarted, 10_000, 'the first run started');
    await dropFile(t.inbox, 'site_live_c.json', Buffer.from('v2'));
    // Its lock is no longer extended: another worker finds the job stalled and starts it again.
    await frozen.close(true);
    t.startWorker(1000);
    await t.completed(jobId);
    const job = await t.queue.getJob(jobId);
    expect(job?.attemptsStarted).toBeGreaterThan(1);
    const claimId = await t.claimIdOf(jobId);
    const claim = claimPath(t.inbox, claimId, 'site_live_c.json');
    expect(t.calls).toEqual([
      { claimId, path: claim, content: 'v1' },
      { claimId, path: claim, content: 'v1' },
    ]);
    expect(await readFile(join(t.inbox, 'site_live_c.json'), 'utf8')).toBe('v2');
  }, 30_000);

  it('a claim job works on its claim, retried too, and leaves the re-drop in the inbox alone', async () => {
    const t = await setup();
    const claimId = newClaimId();
    const claim = claimPath(t.inbox, claimId, 'site_live_d.json');
    await writeFile(claim, 'v1');
    await dropFile(t.inbox, 'site_live_d.json', Buffer.from('v2'));
    t.setBehaviour(async (_claim, call) => {
      if (call === 1) {
        await dropFile(t.inbox, 'site_live_d.json', Buffer.from('v3'));
        throw new Error('transient: Redis is away');
      }
    });
    const job = await enqueueClaim(t.queue, claimId, 'site_live_d.json', Date.now());
    t.startWorker();
    await t.completed(job.id!);
    expect(t.calls).toEqual([
      { claimId, path: claim, content: 'v1' },
      { claimId, path: claim, content: 'v1' },
    ]);
    expect(await readFile(join(t.inbox, 'site_live_d.json'), 'utf8')).toBe('v3');
    expect((await readdir(processingDir(t.inbox))).sort()).toEqual([`${claimId}--site_live_d.json`]);

    // A claim job whose claim is gone (settled before) is gone: it never claims from the inbox.
    const goneId = newClaimId();
    const gone = await enqueueClaim(t.queue, goneId, 'site_live_d.json', Date.now());
    await t.completed(gone.id!);
    expect(t.calls).toHaveLength(2);
    expect(await readFile(join(t.inbox, 'site_live_d.json'), 'utf8')).toBe('v3');
  });

  it('after Redis loses the queue, a new job under a reused id never renames over the claim an earlier job of that id left', async () => {
    const t = await setup();
    await dropFile(t.inbox, 'site_live_e.json', Buffer.from('v1'));
    await enqueueDrop(t.queue, 'site_live_e.json', Date.now());
    const first = await t.lastJobId();
    const firstWorker = t.startWorker();
    await t.completed(first);
    const firstClaim = claimPath(t.inbox, await t.claimIdOf(first), 'site_live_e.json');
    await firstWorker.close();
    // Redis loses everything (a restart without persistence): BullMQ's job ids start again.
    await dropPrefix(t.prefix);
    await new Promise((r) => setTimeout(r, 5));
    await dropFile(t.inbox, 'site_live_e.json', Buffer.from('v2'));
    await enqueueDrop(t.queue, 'site_live_e.json', Date.now());
    const second = await t.lastJobId();
    expect(second).toBe(first);
    t.startWorker();
    await t.completed(second);
    const secondClaim = claimPath(t.inbox, await t.claimIdOf(second), 'site_live_e.json');
    expect(secondClaim).not.toBe(firstClaim);
    expect(t.calls.map((c) => c.content)).toEqual(['v1', 'v2']);
    // The earlier claim is intact (still waiting for whatever settles it), beside the new one.
    expect(await readFile(firstClaim, 'utf8')).toBe('v1');
    expect(await readFile(secondClaim, 'utf8')).toBe('v2');
  });

  it("recovery takes a claim whose job id now belongs to another job (Redis lost its data), and leaves a pending owner's claim alone", async () => {
    const t = await setup();
    // A pending drop job (no worker runs), as id 1 of a queue that started again after data loss.
    await dropFile(t.inbox, 'site_live_f.json', Buffer.from('v2'));
    await enqueueDrop(t.queue, 'site_live_f.json', Date.now());
    const jobId = await t.lastJobId();
    const job = (await t.queue.getJob(jobId))!;
    const owned = dropClaimId(jobId, job.timestamp);
    const orphan = dropClaimId(jobId, job.timestamp - 60_000);
    const legacy = `d${jobId}`; // a claim made before claim ids carried the job's creation time
    for (const id of [owned, orphan, legacy]) await writeFile(claimPath(t.inbox, id, 'site_live_f.json'), id);
    const recovered = await recoverClaims({ inboxDir: t.inbox, queue: t.queue, log: t.log, recentClaimMs: 0 });
    expect(recovered).toBe(1);
    const claimJobs = (await t.queue.getJobs(['waiting'])).filter((j) => j.name === 'claim');
    expect(claimJobs.map((j) => j.data.claimId)).toEqual([orphan]);
  });
});
