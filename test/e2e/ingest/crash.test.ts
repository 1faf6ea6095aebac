/**
 * Crash: SIGKILL the whole service while drops stream in, restart it, and every drop ends
 * published (or superseded by a newer one), none rejected, no partial object in the store.
 */
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXAMPLE_FEEDS } from '../../fixtures/corpus.js';
import { drop, pendingDrops, tinyDoc } from '../../helpers/drops.js';
import { assertObjectsWhole, readCatalog } from '../../helpers/published.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

describe('crash: SIGKILL while drops stream in', () => {
  const prefix = uniquePrefix('e2e-crash');
  const running: RunningOddsfiles[] = [];

  afterAll(async () => {
    for (const r of running) await r.kill();
    await dropPrefix(prefix);
  });

  it('loses nothing and tears nothing', async () => {
    const dataDir = await makeDataDir('e2e-crash');
    const configFile = join(dataDir, 'oddsfiles.yaml');
    // A short lock so that jobs of the killed process are taken up again quickly.
    await writeFile(configFile, 'ingest:\n  lock_duration: 4s\n  rescan: 1s\n');
    const env = baseEnv(dataDir, prefix, { ODDSFILES_CONFIG: configFile });
    const inbox = join(dataDir, 'inbox');
    const first = await startOddsfiles(env);
    running.push(first);

    const base = Date.parse('2026-11-20T00:00:00Z');
    const newest = new Map<string, number>();
    const total = 190;
    for (let i = 0; i < total; i++) {
      const feed = EXAMPLE_FEEDS[i % EXAMPLE_FEEDS.length]!;
      const at = base + i * 1000;
      await drop(inbox, feed.filename, tinyDoc(feed.bookmaker, feed.sport, new Date(at).toISOString(), { i, pad: 'x'.repeat(20_000) }));
      newest.set(feed.filename, at);
      if (i === 95) await first.kill();
      await new Promise((r) => setTimeout(r, 4));
    }
    expect(first.proc.signalCode).toBe('SIGKILL');

    const second = await startOddsfiles(env);
    running.push(second);
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 60_000, 'every drop settled');
    const catalog = await waitFor(
      async () => {
        const cat = await readCatalog(prefix);
        return [...newest].every(([f, at]) => cat.get(f)?.generatedAtMs === at) ? cat : undefined;
      },
      30_000,
      'the newest version of every feed published',
    );
    expect(catalog.size).toBe(38);
    expect(await readdir(join(dataDir, 'rejected')).catch(() => [])).toEqual([]);
    expect(await assertObjectsWhole(join(dataDir, 'store'))).toBeGreaterThanOrEqual(38);
    expect(await second.stop()).toBe(0);
  }, 150_000);
});
