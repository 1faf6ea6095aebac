/**
 * Late writes to a rejected drop (src/ingest/drop-folder/late-writes.ts), on real folders and a
 * real BullMQ queue: a parked claim written after its rejection goes through the pipeline again;
 * an operator's fix of the kept copy in REJECTED_DIR (before a `rejected retry`) is no late write.
 */
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newClaimId } from '../../src/ingest/drop-folder/inbox.js';
import { checkLateWrites } from '../../src/ingest/drop-folder/late-writes.js';
import { createIngestQueue, type IngestQueue } from '../../src/ingest/queue.js';
import { parkRejectedClaim, rejectionId, watchDir, writeRejection, type RejectionRecord } from '../../src/ingest/rejections/rejected.js';
import { capturingLogger } from '../helpers/log.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const FEED = 'site_live_bluewater_soccer.json';
const prefix = uniquePrefix('late-writes');
const { log } = capturingLogger();

let connection: Redis;
let queue: IngestQueue;
let dir: string;
let inbox: string;
let rejectedDir: string;

beforeAll(() => {
  connection = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  queue = createIngestQueue(connection, prefix);
});

afterAll(async () => {
  await queue.close();
  connection.disconnect();
  await dropPrefix(prefix);
});

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oddsfiles-late-writes-'));
  inbox = join(dir, 'inbox');
  rejectedDir = join(dir, 'rejected');
  await mkdir(join(inbox, '.processing'), { recursive: true });
});

afterEach(async () => {
  await queue.obliterate({ force: true });
  await rm(dir, { recursive: true, force: true });
});

/** A drop rejected on the bytes `judged` and parked, as a worker leaves it; its times set a minute back. */
async function rejectAndPark(judged: string): Promise<RejectionRecord> {
  const record: RejectionRecord = {
    id: rejectionId(new Date(), newClaimId()),
    filename: FEED,
    reason: 'not_an_object',
    detail: 'the top level is an array, not an object',
    received_at: new Date().toISOString(),
  };
  const claim = join(inbox, '.processing', `claim-${FEED}`);
  await writeFile(claim, judged);
  await writeRejection(rejectedDir, record, claim, Buffer.from(judged));
  await parkRejectedClaim(inbox, claim, record.id);
  // Everything as written a minute ago, so "written since" is told by the clock, not by luck.
  const past = new Date(Date.now() - 60_000);
  for (const p of [join(watchDir(inbox), record.id), join(rejectedDir, record.id, FEED), join(rejectedDir, record.id, 'reason.json')]) {
    await utimes(p, past, past);
  }
  return record;
}

const deps = () => ({ inboxDir: inbox, rejectedDir, queue, watchMs: 600_000, log });

describe('late writes to a rejected drop', () => {
  it('a parked claim written after its rejection withdraws it and is queued again', async () => {
    const record = await rejectAndPark('[1,2]');
    await writeFile(join(watchDir(inbox), record.id), '[1,2,3]');
    expect(await checkLateWrites(deps())).toBe(1);
    expect(await readdir(rejectedDir)).not.toContain(record.id);
    expect((await queue.getJobs(['waiting', 'prioritized', 'delayed'])).map((j) => j.data.name)).toEqual([FEED]);
  });

  it('an operator fixing the kept copy in REJECTED_DIR is no late write: the rejection stays for a retry', async () => {
    const record = await rejectAndPark('[1,2]');
    await writeFile(join(rejectedDir, record.id, FEED), '{"events":[],"fixed":"by an operator"}');
    expect(await checkLateWrites(deps())).toBe(0);
    expect(await readdir(rejectedDir)).toContain(record.id);
    expect(await readdir(watchDir(inbox))).toContain(record.id);
    expect(await queue.getJobs(['waiting', 'prioritized', 'delayed'])).toEqual([]);
  });

  it('a parked claim left as judged stays parked', async () => {
    const record = await rejectAndPark('[1,2]');
    expect(await checkLateWrites(deps())).toBe(0);
    expect(await readdir(rejectedDir)).toContain(record.id);
  });
});
