/**
 * The inbox watcher against a real folder and a real BullMQ queue: kernel events by default,
 * chokidar polling with `ingest.poll`. Every drop becomes a queued job, quickly, whatever came
 * before it; ignored names (the workers' inbox marker too) never do; a folder is reported, not queued.
 */
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureInboxMarker, inboxMarkerPath } from '../../src/ingest/drop-folder/inbox-marker.js';
import { createIngestQueue, type IngestQueue } from '../../src/ingest/queue.js';
import { startWatcher, type InboxWatcher } from '../../src/ingest/drop-folder/watcher.js';
import { capturingLogger } from '../helpers/log.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const prefix = uniquePrefix('watcher');
const { log, lines } = capturingLogger();

let connection: Redis;
let queue: IngestQueue;
let inbox: string;
let watcher: InboxWatcher | undefined;

const queuedNames = async () => (await queue.getJobs(['waiting', 'prioritized', 'delayed'])).map((j) => j.data.name).sort();

async function waitUntil(what: string, ms: number, check: () => Promise<boolean>): Promise<number> {
  const t0 = Date.now();
  while (!(await check())) {
    if (Date.now() - t0 > ms) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
  return Date.now() - t0;
}

/** Publisher-style drop: a dotfile, then a rename. */
async function drop(name: string): Promise<void> {
  await writeFile(join(inbox, `.${name}.part`), '{}');
  await rename(join(inbox, `.${name}.part`), join(inbox, name));
}

beforeAll(async () => {
  connection = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  queue = createIngestQueue(connection, prefix);
});

afterEach(async () => {
  await watcher?.close();
  watcher = undefined;
  await queue.obliterate({ force: true });
  await rm(inbox, { recursive: true, force: true });
  lines.length = 0;
});

afterAll(async () => {
  await queue.close();
  await connection.quit();
  await dropPrefix(prefix);
});

// The kernel events' lstat is synchronous by default, on the thread pool with `ingest.sync_io_max_bytes: 0`.
for (const mode of ['kernel events', 'kernel events, sync_io off', 'polling'] as const) {
  describe(mode, () => {
    const pollMs = mode === 'polling' ? 100 : 0;
    const syncIo = mode !== 'kernel events, sync_io off';
    // Kernel events arrive within milliseconds; polling within a few periods.
    const within = mode === 'polling' ? 2000 : 300;

    it('queues the files already there at start, even one written a moment before, and each new drop', async () => {
      inbox = await mkdtemp(join(tmpdir(), 'oddsfiles-watcher-'));
      await writeFile(join(inbox, 'site_live_northwind_soccer.json'), '{}');
      watcher = await startWatcher({ inboxDir: inbox, queue, settleMs: 50, rescanMs: 60_000, pollMs, syncIo, log });
      // The young file is queued by the start-up pass itself, not by a rescan a minute later.
      expect(await queuedNames()).toEqual(['site_live_northwind_soccer.json']);

      await drop('site_live_bluewater_soccer.json');
      await waitUntil('the renamed drop queued', within, async () => (await queuedNames()).includes('site_live_bluewater_soccer.json'));
      expect(lines.some((l) => l.msg === 'watching the inbox' && l.mode === (pollMs ? 'poll every 100 ms' : 'kernel events'))).toBe(true);
    });

    it('never queues names publishers write to, nor the inbox marker, and reports a folder instead of queuing it', async () => {
      inbox = await mkdtemp(join(tmpdir(), 'oddsfiles-watcher-'));
      // The workers' inbox marker, there before the start-up pass and written again while watched.
      await ensureInboxMarker(inbox);
      watcher = await startWatcher({ inboxDir: inbox, queue, settleMs: 50, rescanMs: 60_000, pollMs, syncIo, log });
      await rm(inboxMarkerPath(inbox));
      await ensureInboxMarker(inbox);
      await writeFile(join(inbox, 'site_live_redstone_soccer.json.tmp'), '{}');
      await writeFile(join(inbox, 'site_live_redstone_soccer.json.part'), '{}');
      await writeFile(join(inbox, '.site_live_redstone_soccer.json'), '{}');
      await mkdir(join(inbox, 'a-folder'));
      await drop('site_live_redstone_tennis.json');
      await waitUntil('the real drop queued', within, async () => (await queuedNames()).includes('site_live_redstone_tennis.json'));
      await waitUntil('the folder reported', within, async () => lines.some((l) => l.filename === 'a-folder' && String(l.msg).includes('not a drop')));
      await new Promise((r) => setTimeout(r, pollMs * 3));
      expect(await queuedNames()).toEqual(['site_live_redstone_tennis.json']);
    });
  });
}

describe('kernel events', () => {
  it('catches every re-drop of one filename right after the previous one left the inbox', async () => {
    inbox = await mkdtemp(join(tmpdir(), 'oddsfiles-watcher-'));
    watcher = await startWatcher({ inboxDir: inbox, queue, settleMs: 50, rescanMs: 60_000, log });
    const name = 'site_live_goldcrest_soccer.json';
    await mkdir(join(inbox, '.processing'), { recursive: true });
    for (let i = 0; i < 20; i++) {
      await drop(name);
      await waitUntil(`drop ${i} queued`, 300, async () => (await queuedNames()).includes(name));
      // As a worker does: claim it out of the inbox, and settle the job.
      await rename(join(inbox, name), join(inbox, '.processing', `c${i}--${name}`));
      await queue.obliterate({ force: true });
    }
  });
});
