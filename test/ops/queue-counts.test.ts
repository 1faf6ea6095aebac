/**
 * createQueueCounts (plain ioredis) against BullMQ's own Queue.getJobCounts and getWorkersCount on
 * the same real queue, with jobs in every state: the reader's /metrics and `oddsfiles status` use
 * the former, so a BullMQ upgrade that moves its keys must fail here.
 */
import { FlowProducer, Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QUEUE_STATES } from '../../src/ops/metrics.js';
import { createQueueCounts } from '../../src/ops/queue-counts.js';
import { INGEST_QUEUE } from '../../src/redis/key-names.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const prefix = uniquePrefix('qcounts');
const connection = () => new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });

describe('queue counts without BullMQ', () => {
  const redis = connection();
  const queue = new Queue(INGEST_QUEUE, { connection: connection(), prefix });
  const flows = new FlowProducer({ connection: connection(), prefix });
  const counts = createQueueCounts(redis, prefix);
  let worker: Worker | undefined;
  let release: () => void = () => undefined;

  beforeAll(async () => {
    // completed 2, failed 1: a worker takes the first three jobs, then holds one active.
    const held = new Promise<void>((r) => (release = r));
    let n = 0;
    worker = new Worker(
      INGEST_QUEUE,
      async (job: Job) => {
        n++;
        if (job.name === 'fail') throw new Error('on purpose');
        if (job.name === 'hold') await held;
      },
      { connection: connection(), prefix, concurrency: 1, autorun: true },
    );
    await queue.add('ok', {}, { removeOnComplete: false });
    await queue.add('ok', {}, { removeOnComplete: false });
    await queue.add('fail', {}, { removeOnFail: false });
    await queue.add('hold', {});
    while (n < 4) await new Promise((r) => setTimeout(r, 10));
    // Now the worker is busy: the rest stays where it is put.
    await queue.add('later', {}, { delay: 60_000 });
    await queue.add('later', {}, { delay: 60_000 });
    await queue.add('waiting', {});
    await queue.add('waiting', {});
    await queue.add('waiting', {});
    await queue.add('urgent', {}, { priority: 3 });
    await flows.add({ name: 'parent', queueName: INGEST_QUEUE, children: [{ name: 'child', queueName: `${INGEST_QUEUE}-children` }] });
  });

  afterAll(async () => {
    release();
    await worker?.close(true);
    await Promise.all([queue.close(), flows.close()]);
    redis.disconnect();
    await dropPrefix(prefix);
  });

  it('counts every state as BullMQ does, paused included', async () => {
    const ours = await counts.getJobCounts(...QUEUE_STATES);
    const theirs = await queue.getJobCounts(...QUEUE_STATES);
    expect(ours).toEqual(theirs);
    // The fixture put something in each state it can reach (not a comparison of two zeros).
    expect(ours).toMatchObject({ completed: 2, failed: 1, active: 1, delayed: 2, prioritized: 1, 'waiting-children': 1 });
    expect(ours.waiting).toBeGreaterThanOrEqual(3);

    await queue.pause();
    try {
      const pausedOurs = await counts.getJobCounts('waiting');
      expect(pausedOurs).toEqual(await queue.getJobCounts('waiting'));
      expect(pausedOurs.waiting! + pausedOurs.paused!).toBeGreaterThanOrEqual(3);
    } finally {
      await queue.resume();
    }
  });

  it('counts the connected workers as BullMQ does', async () => {
    const ours = await counts.getWorkersCount();
    expect(ours).toBe(await queue.getWorkersCount());
    expect(ours).toBe(1);
  });
});
