/**
 * `oddsfiles status` in-process (runCli with a real CliContext) on the real Redis: a fresh catalog
 * exits 0, a stale one exits 1; the JSON keeps its fields; the table lists every registry feed,
 * never-published ones included, the queue counts and the last rejections.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCatalog } from '../../src/catalog/redis-catalog.js';
import type { CatalogEntry } from '../../src/catalog/types.js';
import { createCliContext } from '../../src/cli/context.js';
import { runCli } from '../../src/cli/program.js';
import { createIngestQueue } from '../../src/ingest/queue.js';
import { createRejectionLog } from '../../src/ingest/rejections/rejection-log.js';
import { redisKeys } from '../../src/redis/key-names.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';

interface StatusJson {
  redis: string | null;
  now: string;
  seq: number;
  changes: Record<string, number | null>;
  queue: Record<string, number>;
  workers: number | null;
  feeds: { filename: string; stale: boolean; ageMs: number; publishedAgeMs: number; staleAfterMs: number; generatedAt: string }[];
  missing: string[];
  stale: number;
  rejections: { id: string; reason: string }[];
}

describe('oddsfiles status', () => {
  const prefix = uniquePrefix('ops-status');
  const keys = redisKeys(prefix);
  let dir: string;
  let redis: Redis;
  let env: Record<string, string>;

  async function status(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    let stdout = '';
    let stderr = '';
    const sink = (write: (s: string) => void) =>
      new Writable({
        write(chunk: Buffer, _enc, cb) {
          write(chunk.toString('utf8'));
          cb();
        },
      });
    const ctx = createCliContext({ stdout: sink((s) => (stdout += s)), stderr: sink((s) => (stderr += s)) }, env, dir);
    const saved = process.exitCode;
    process.exitCode = undefined;
    try {
      const code = await runCli(ctx, ['status', ...args], 'test');
      return { code, stdout, stderr };
    } finally {
      // The command signals a stale feed through process.exitCode: never leak it into the test run.
      process.exitCode = saved;
    }
  }

  function entry(filename: string, bookmaker: string, kind: CatalogEntry['kind'], ageMs: number, sha: string): CatalogEntry {
    const t = Date.now() - ageMs;
    return {
      filename,
      bookmaker,
      kind,
      sport: filename.endsWith('_soccer.json') ? 'soccer' : null,
      object: `objects/${filename}/${sha}.json`,
      sha256: sha,
      size: 1234,
      generatedAt: new Date(t).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      generatedAtMs: Math.floor(t / 1000) * 1000,
      publishedAt: new Date().toISOString(),
    };
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oddsfiles-ops-status-'));
    env = { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix, DATA_DIR: dir, LOG_LEVEL: 'silent' };
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    const catalog = createCatalog(redis, keys);
    await catalog.commit(entry('site_live_northwind_soccer.json', 'northwind', 'live', 2_000, 'a1'), 10);
    await catalog.commit(entry('site_pregame_redstone_soccer.json', 'redstone', 'pregame', 60_000, 'b1'), 10);
    const queue = createIngestQueue(redis, prefix);
    await queue.add('drop', { name: 'site_live_bluewater_tennis.json', receivedAt: Date.now() });
    await queue.add('drop', { name: 'site_live_goldcrest_tennis.json', receivedAt: Date.now() });
    await queue.close();
    await createRejectionLog(redis, keys).record({
      id: '20261122T060000Z-d7',
      filename: 'site_live_northwind_tennis.json',
      reason: 'schema',
      detail: 'events: must be array',
      received_at: new Date(Date.now() - 90_000).toISOString(),
    });
  });

  afterAll(async () => {
    redis?.disconnect();
    await dropPrefix(prefix);
    await rm(dir, { recursive: true, force: true });
  });

  it('a fresh catalog: exit 0, every field of the JSON, never-published feeds listed', async () => {
    const res = await status(['--json']);
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    const s = JSON.parse(res.stdout) as StatusJson;
    expect(Object.keys(s).sort()).toEqual([
      'ahead',
      'changes',
      'feeds',
      'folders',
      'missing',
      'now',
      'queue',
      'redis',
      'rejections',
      'seq',
      'stale',
      'superseded',
      'workers',
    ]);
    // The server answering, as host:port (behind Sentinel: the primary in use).
    expect(s.redis).toMatch(/^127\.0\.0\.1:\d+$/);
    // Committed straight to the catalog here: no reader runs, so no reader figures.
    expect(s.changes).toEqual({ position: 2, oldest: 1, streams: 0, events: 0, dropped: 0, waiting: 0, readers: 0 });
    expect(s.stale).toBe(0);
    expect(s.seq).toBe(2);
    expect(s.queue).toMatchObject({ waiting: 2, active: 0, delayed: 0, failed: 0, completed: 0 });
    expect(s.workers).toBe(0);
    expect(s.feeds.map((f) => f.filename)).toEqual(['site_live_northwind_soccer.json', 'site_pregame_redstone_soccer.json']);
    const live = s.feeds[0]!;
    expect(live.stale).toBe(false);
    expect(live.staleAfterMs).toBe(30_000);
    expect(live.ageMs).toBeGreaterThanOrEqual(2_000);
    expect(live.ageMs).toBeLessThan(20_000);
    expect(s.feeds[1]!.staleAfterMs).toBe(15 * 60_000);
    expect(s.missing).toHaveLength(38 - 2);
    expect(s.missing).toContain('site_livepre_oddsport.json');
    expect(s.rejections).toEqual([expect.objectContaining({ id: '20261122T060000Z-d7', reason: 'schema' })]);

    const text = await status([]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^queue {4}waiting 2, active 0, delayed 0, prioritized 0, failed 0, completed 0; workers 0\n/);
    expect(text.stdout).toMatch(/site_live_northwind_soccer\.json\s+northwind\s+\S+Z\s+\d+s\s+\S+\s+1234\s+fresh/);
    expect(text.stdout).toMatch(/site_livepre_oddsport\.json\s+oddsport\s+-\s+-\s+-\s+-\s+never published/);
    // Every registry feed has its row: 38 rows plus the header.
    expect(text.stdout.split('\n').filter((l) => /^site_/.test(l))).toHaveLength(38);
    expect(text.stdout).toContain("2 published, 0 stale, 36 of the registry's 38 never published");
    expect(text.stdout).toMatch(/last rejections\n.*\n\d+m\d\ds ago\s+20261122T060000Z-d7\s+site_live_northwind_tennis\.json\s+schema\s+events: must be array/);
  });

  it("a stale feed: exit 1, marked with its kind's threshold", async () => {
    await createCatalog(redis, keys).commit(entry('site_live_silverline.json', 'silverline', 'live', 5 * 60_000, 'c1'), 10);
    const res = await status(['--json']);
    expect(res.code).toBe(1);
    const s = JSON.parse(res.stdout) as StatusJson;
    expect(s.stale).toBe(1);
    expect(s.feeds.find((f) => f.filename === 'site_live_silverline.json')).toMatchObject({ stale: true, staleAfterMs: 30_000 });
    expect(s.feeds.filter((f) => f.stale)).toHaveLength(1);
    const text = await status([]);
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(/site_live_silverline\.json\s+silverline\s+\S+\s+5m0\ds\s+\S+\s+1234\s+STALE \(> 30s\)/);
    expect(text.stdout).toContain('3 published, 1 stale, 35 of');
  });

  it('bad usage exits 2', async () => {
    const res = await status(['--rejections', 'many']);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/--rejections takes a whole number/);
  });
});
