/**
 * Fault 3, the worker supervisor (bullmq#4585): a worker that is alive but takes no job while jobs
 * wait is replaced, and the jobs then run. The BullMQ in use already carries the upstream fix, and
 * the Redis outage test (redis.test.ts) could not make a worker stick, so the stuck worker
 * is made here directly: the first worker the supervisor gets never runs (autorun: false), and
 * appears busy with two jobs whose end was never reported (as after an outage).
 */
import { Writable } from 'node:stream';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { createIngestQueue, type IngestJobData, type IngestResult } from '../../src/ingest/queue.js';
import { superviseWorker, type SupervisedWorker } from '../../src/ingest/supervisor.js';
import { INGEST_QUEUE } from '../../src/redis/key-names.js';
import { TEST_REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/service.js';

describe('fault: a stuck worker is replaced by the supervisor', () => {
  const prefix = uniquePrefix('faults-supervisor');
  const connections: Redis[] = [];
  const conn = () => {
    const c = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    connections.push(c);
    return c;
  };
  const queue = createIngestQueue(conn(), prefix);
  let supervised: SupervisedWorker | undefined;

  afterAll(async () => {
    await supervised?.close(true);
    await queue.close();
    for (const c of connections) c.disconnect();
    await dropPrefix(prefix);
  });

  it('replaces a worker that takes nothing while jobs wait, and the jobs then run', async () => {
    const lines: string[] = [];
    const log = createLogger({
      level: 'debug',
      pretty: false,
      destination: new Writable({ write: (chunk: Buffer, _enc, cb) => (lines.push(chunk.toString()), cb()) }),
    });
    const processed: string[] = [];
    let created = 0;
    supervised = await superviseWorker({
      queue,
      concurrency: 2,
      log,
      stuckAfterMs: 1500,
      checkEveryMs: 250,
      create: () => {
        created++;
        const stuck = created === 1;
        return new Worker<IngestJobData, IngestResult>(
          INGEST_QUEUE,
          async (job) => {
            processed.push(job.data.name);
            return { outcome: 'published', filename: job.data.name };
          },
          { connection: conn(), prefix, concurrency: 2, autorun: !stuck },
        );
      },
    });
    // Jobs it "took" whose end was never reported (Redis away when they finished): they must not
    // make the stuck worker look busy for ever.
    const first = supervised.current() as unknown as NodeJS.EventEmitter;
    first.emit('active', { id: 'ghost-1' }, 'waiting');
    first.emit('active', { id: 'ghost-2' }, 'waiting');
    // Idle with an empty queue for longer than stuckAfterMs: never replaced for being idle.
    await new Promise((r) => setTimeout(r, 2000));
    expect(supervised.restarts).toBe(0);

    const t0 = Date.now();
    for (let i = 0; i < 5; i++) await queue.add('drop', { name: `f${i}.json`, receivedAt: Date.now() });
    await waitFor(() => processed.length === 5, 15_000, 'the 5 jobs processed by the replacement worker');
    const recoveredMs = Date.now() - t0;
    console.info(JSON.stringify({ test: 'faults.supervisor', restarts: supervised.restarts, recoveredMs }));
    expect(supervised.restarts).toBe(1);
    expect(created).toBe(2);
    expect(lines.some((l) => l.includes('replacing it'))).toBe(true);

    // A healthy worker with work to do is left alone.
    for (let i = 0; i < 20; i++) await queue.add('drop', { name: `g${i}.json`, receivedAt: Date.now() });
    await waitFor(() => processed.length === 25, 15_000, 'the next 20 jobs');
    await new Promise((r) => setTimeout(r, 2000));
    expect(supervised.restarts).toBe(1);
  }, 60_000);
});
