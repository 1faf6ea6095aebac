/**
 * End to end over the real command: `oddsfiles start` as a child process, the generated corpus
 * dropped into its inbox, outcomes read from Redis (catalog and queue), the store and REJECTED_DIR.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIngestQueue } from '../../../src/ingest/queue.js';
import { generateCorpus, type FixtureCase } from '../../fixtures/corpus.js';
import { drop, pendingDrops, rejectionRecords } from '../../helpers/drops.js';
import { assertObjectsWhole, readCatalog, sha256 } from '../../helpers/published.js';
import { TEST_REDIS_URL, dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const corpus = generateCorpus();
const group = (g: FixtureCase['group']) => corpus.filter((c) => c.group === g);

describe('ingest end to end (oddsfiles start)', () => {
  const prefix = uniquePrefix('e2e-ingest');
  let dataDir: string;
  let env: Record<string, string>;
  let svc: RunningOddsfiles;
  let inbox: string;
  let storeDir: string;

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-ingest');
    env = baseEnv(dataDir, prefix);
    inbox = join(dataDir, 'inbox');
    storeDir = join(dataDir, 'store');
    svc = await startOddsfiles(env);
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  const settled = () => waitFor(async () => (await pendingDrops(inbox)).length === 0, 30_000, 'an empty inbox');

  it('publishes every valid drop byte for byte, and empties the inbox', async () => {
    const valid = group('valid');
    expect(valid).toHaveLength(38);
    await Promise.all(valid.map((c) => drop(inbox, c.filename, c.bytes)));
    await waitFor(async () => (await readCatalog(prefix)).size === 38, 30_000, '38 published feeds');
    await settled();
    const catalog = await readCatalog(prefix);
    for (const c of valid) {
      const entry = catalog.get(c.filename)!;
      expect(entry, c.filename).toBeDefined();
      expect(entry.sha256).toBe(sha256(c.bytes));
      expect(entry.size).toBe(c.bytes.length);
      const stored = await readFile(join(storeDir, entry.object));
      expect(stored.equals(c.bytes), c.filename).toBe(true);
    }
    const manifest = JSON.parse(await readFile(join(storeDir, 'manifest.json'), 'utf8')) as { files: Record<string, unknown> };
    expect(Object.keys(manifest.files).sort()).toEqual(valid.map((c) => c.filename).sort());
  });

  it('publishes the edge cases as the corpus expects', async () => {
    const edge = group('edge');
    const before = Date.now();
    await Promise.all(edge.map((c) => drop(inbox, c.filename, c.bytes)));
    await settled();
    const catalog = await waitFor(
      async () => {
        const cat = await readCatalog(prefix);
        return edge.every((c) => cat.get(c.filename)?.sha256 !== sha256(group('valid').find((v) => v.filename === c.filename)!.bytes)) ? cat : undefined;
      },
      30_000,
      'edge cases published',
    );
    for (const c of edge) {
      const entry = catalog.get(c.filename)!;
      const stored = await readFile(join(storeDir, entry.object));
      if (c.name === 'utf8-bom') {
        expect(stored.equals(c.bytes.subarray(3))).toBe(true);
        expect(() => JSON.parse(stored.toString('utf8'))).not.toThrow();
      } else if (c.name === 'no-generated-at') {
        const doc = JSON.parse(stored.toString('utf8')) as Record<string, unknown>;
        const stamped = Date.parse(doc.generated_at as string);
        expect(stamped).toBeGreaterThanOrEqual(before - 1000);
        expect(stamped).toBeLessThanOrEqual(Date.now());
        expect(doc.generated_at).toBe(entry.generatedAt);
        const { generated_at: _drop, ...rest } = doc;
        expect(rest).toEqual(JSON.parse(c.bytes.toString('utf8')));
      } else {
        expect(stored.equals(c.bytes), c.name).toBe(true);
      }
    }
  });

  it('rejects every invalid drop with its reason, keeps it with reason.json, and leaves the catalog alone', async () => {
    const invalid = group('invalid');
    const catalogBefore = await readCatalog(prefix);
    await Promise.all(invalid.map((c) => drop(inbox, c.filename, c.bytes)));
    const rejectedDir = join(dataDir, 'rejected');
    const reasons = await waitFor(
      async () => {
        const records = await rejectionRecords(rejectedDir);
        return records.length === invalid.length ? records : undefined;
      },
      30_000,
      'every invalid drop rejected',
    );
    await settled();
    for (const c of invalid) {
      const r = reasons.find((x) => x.filename === c.filename)!;
      expect(r, c.name).toBeDefined();
      if (c.expected.reason !== 'any') expect(r.reason, c.name).toBe(c.expected.reason);
      expect(Object.keys(r).sort()).toEqual(['detail', 'filename', 'id', 'reason', 'received_at']);
      const kept = await readFile(join(rejectedDir, r.id!, c.filename));
      expect(kept.equals(c.bytes), c.name).toBe(true);
    }
    // The mismatch says which values the registry accepts for the file.
    expect(reasons.find((r) => r.reason === 'bookmaker_mismatch')!.detail).toBe(
      'the document says "bluewater", the filename names "northwind"; accepted: northwind',
    );
    expect(await readCatalog(prefix)).toEqual(catalogBefore);
    expect(await assertObjectsWhole(storeDir)).toBeGreaterThanOrEqual(38);

    const list = await runCli(env, ['rejected', 'list', '--json']);
    expect(list.code).toBe(0);
    expect((JSON.parse(list.stdout) as unknown[]).length).toBe(invalid.length);
    const text = await runCli(env, ['rejected', 'list']);
    expect(text.stdout).toContain('future_generated_at');

    // A rejection is an outcome, not a failure: each rejected drop's job completed with it, none failed.
    const connection = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    const queue = createIngestQueue(connection, prefix);
    try {
      expect(await queue.getJobCounts('failed')).toEqual({ failed: 0 });
      const results = (await queue.getJobs(['completed'])).map((j) => j.returnvalue);
      for (const r of reasons) {
        expect(results, r.filename).toContainEqual({ outcome: 'rejected', filename: r.filename, reason: r.reason, detail: r.detail, rejectionId: r.id });
      }
    } finally {
      await queue.close();
      connection.disconnect();
    }
  });

  it('status lists what is published, the queue and the last rejections', async () => {
    const res = await runCli(env, ['status', '--json']);
    // The corpus is from 2026-11-21: every feed is stale against 30 s / 15 min thresholds.
    expect(res.code).toBe(1);
    const status = JSON.parse(res.stdout) as {
      feeds: { filename: string; stale: boolean; generatedAt: string }[];
      queue: Record<string, number>;
      rejections: unknown[];
      missing: string[];
    };
    expect(status.feeds).toHaveLength(38);
    expect(status.missing).toEqual([]);
    expect(status.queue.waiting).toBe(0);
    // Rejections complete their jobs: `failed` counts real failures only.
    expect(status.queue.failed).toBe(0);
    expect(status.queue.completed).toBeGreaterThan(38);
    expect(status.rejections.length).toBeGreaterThan(0);
    const text = await runCli(env, ['status']);
    expect(text.stdout).toContain('site_livepre_oddsport.json');
    expect(text.stdout).toMatch(/STALE/);
  });

  it('retries a rejected drop through the pipeline', async () => {
    type Listed = { id: string; reason: string; filename: string; received_at: string };
    const list = JSON.parse((await runCli(env, ['rejected', 'list', '--json'])).stdout) as Listed[];
    const target = list.find((r) => r.reason === 'unknown_filename')!;
    const res = await runCli(env, ['rejected', 'retry', target.id]);
    // Its outcome, as publish reports it: still an unknown filename, so rejected again (exit 1).
    expect(res.code).toBe(1);
    expect(res.stdout.startsWith(`${target.id}\t${target.filename}\trejected\tunknown_filename: `), res.stdout).toBe(true);
    let after: Listed[] = [];
    await waitFor(
      async () => {
        after = JSON.parse((await runCli(env, ['rejected', 'list', '--json'])).stdout) as Listed[];
        return after.length === list.length && !after.some((r) => r.id === target.id);
      },
      20_000,
      'the retried drop rejected again under a new id',
    );
    // It keeps the time it was first received (operations.md: a retried drop shows as one large lag).
    const again = after.find((r) => !list.some((l) => l.id === r.id))!;
    expect(again.filename).toBe(target.filename);
    expect(again.received_at).toBe(target.received_at);
    expect((await runCli(env, ['rejected', 'retry', 'no-such-id'])).code).toBe(1);
    expect((await runCli(env, ['rejected', 'retry'])).code).toBe(2);
  });

  it('publish FILE submits through the same pipeline and reports outcomes', async () => {
    const file = join(dataDir, 'site_live_northwind_soccer.json');
    const { writeFile } = await import('node:fs/promises');
    await writeFile(file, JSON.stringify({ bookmaker: 'northwind', sport: 'soccer', events: [] }));
    const res = await runCli(env, ['publish', file]);
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    expect(res.stdout).toContain('published');
    const bad = join(dataDir, 'odds.json');
    await writeFile(bad, '{}');
    const rej = await runCli(env, ['publish', bad]);
    expect(rej.code).toBe(1);
    // The line ends with the id the rejection is kept under (its folder in REJECTED_DIR).
    const [line, id] = rej.stdout.split('\tid ');
    expect(line).toBe(`${bad}\trejected\tunknown_filename: "odds.json" is not a feed filename of the registry`);
    expect(id).toMatch(/^\d{8}T\d{9}Z-\S+\n$/);
    expect(existsSync(join(dataDir, 'rejected', id!.trim(), 'reason.json'))).toBe(true);
    const json = await runCli(env, ['publish', '--json', bad]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual([
      {
        file: bad,
        outcome: 'rejected',
        reason: 'unknown_filename',
        detail: '"odds.json" is not a feed filename of the registry',
        // Its folder in REJECTED_DIR.
        rejectionId: expect.stringMatching(/^\d{8}T\d{9}Z-/),
      },
    ]);
  });

  it('stops on SIGTERM with exit code 0', async () => {
    expect(await svc.stop()).toBe(0);
  });
});
