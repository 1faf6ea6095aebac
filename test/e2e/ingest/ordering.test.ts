/**
 * Newest wins: 40 versions of one filename dropped out of order. What stays published is the
 * newest, and no announcement ever replaced a newer version with an older one.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogChange } from '../../../src/catalog/types.js';
import { drop, pendingDrops, tinyDoc } from '../../helpers/drops.js';
import { readCatalog } from '../../helpers/published.js';
import { TEST_REDIS_URL, dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

function shuffled<T>(items: T[], seed: number): T[] {
  const out = [...items];
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe('ordering: newest generated_at wins', () => {
  const prefix = uniquePrefix('e2e-order');
  let svc: RunningOddsfiles;
  let worker2: RunningOddsfiles;
  let inbox: string;
  let env: Record<string, string>;
  const sub = new Redis(TEST_REDIS_URL);
  const announced: { filename: string; ms: number }[] = [];
  const seenFor = (f: string) => announced.filter((a) => a.filename === f).map((a) => a.ms);

  beforeAll(async () => {
    const dataDir = await makeDataDir('e2e-order');
    inbox = join(dataDir, 'inbox');
    // Subscribing before the ready check completes makes ioredis send INFO in subscriber mode.
    if (sub.status !== 'ready') await new Promise((r) => sub.once('ready', r));
    await sub.subscribe(`${prefix}:catalog:changes`);
    sub.on('message', (_ch, msg) => {
      const { entry } = JSON.parse(msg) as CatalogChange;
      announced.push({ filename: entry.filename, ms: entry.generatedAtMs });
    });
    env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    worker2 = await startOddsfiles(env, ['start', '--roles', 'worker']);
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    await worker2?.stop();
    sub.disconnect();
    await dropPrefix(prefix);
  });

  it('keeps the newest of 40 versions submitted at once, in random order, to two worker processes', async () => {
    const name = 'site_live_redstone_soccer.json';
    const base = Date.parse('2026-11-20T10:00:00Z');
    const dir = await makeDataDir('e2e-order-files');
    const files: string[] = [];
    for (const [n, i] of shuffled(
      Array.from({ length: 40 }, (_, k) => k),
      7,
    ).entries()) {
      await mkdir(join(dir, String(n)));
      const file = join(dir, String(n), name);
      await writeFile(file, tinyDoc('redstone', 'soccer', new Date(base + i * 1000).toISOString(), { version: i }));
      files.push(file);
    }
    const res = await runCli(env, ['publish', ...files, '--json']);
    expect(res.code, res.stderr).toBe(0);
    const outcomes = (JSON.parse(res.stdout) as { outcome: string }[]).map((o) => o.outcome);
    expect(outcomes.every((o) => o === 'published' || o === 'superseded')).toBe(true);
    expect(outcomes).toContain('superseded');
    const entry = (await readCatalog(prefix)).get(name)!;
    expect(entry.generatedAtMs).toBe(base + 39_000);
    // Announcements never went backwards.
    const seen = seenFor(name);
    expect(seen.length).toBeGreaterThan(0);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!).toBeGreaterThanOrEqual(seen[i - 1]!);
    expect(seen.at(-1)).toBe(base + 39_000);
  });

  it('publishes the newest when it is dropped last after older ones', async () => {
    const name = 'site_pregame_redstone_soccer.json';
    const base = Date.parse('2026-11-20T12:00:00Z');
    const order = shuffled(
      Array.from({ length: 39 }, (_, i) => i),
      3,
    );
    for (const i of order) await drop(inbox, name, tinyDoc('redstone', 'soccer', new Date(base + i * 1000).toISOString()));
    await drop(inbox, name, tinyDoc('redstone', 'soccer', new Date(base + 39_000).toISOString()));
    await waitFor(async () => (await readCatalog(prefix)).get(name)?.generatedAtMs === base + 39_000, 30_000, 'the newest published');
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 30_000, 'an empty inbox');
    // An older version dropped now is superseded, not published and not rejected.
    await drop(inbox, name, tinyDoc('redstone', 'soccer', new Date(base).toISOString()));
    // Either process may have taken the job: look in both logs.
    const settled = await waitFor(
      () => [...svc.logs, ...worker2.logs].find((l) => l.filename === name && l.generatedAt === new Date(base).toISOString()),
      20_000,
      'the old drop settled',
    );
    expect(settled.outcome).toBe('superseded');
    expect((await readCatalog(prefix)).get(name)!.generatedAtMs).toBe(base + 39_000);
  });
});
