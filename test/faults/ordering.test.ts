/**
 * Fault 2, the reader's side: out-of-order versions of the same filenames, submitted in random
 * order to three worker processes at once (through `oddsfiles publish` and through the inbox),
 * while pollers download from two reader processes. The newest stays everywhere, and no poller
 * ever sees an older generated_at after a newer one, a torn body, or a 404 once served.
 * (test/e2e/ingest/ordering.test.ts covers the catalog's side.)
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXAMPLE_FEEDS } from '../fixtures/corpus.js';
import {
  SLOW_FAULTS,
  VersionBook,
  createApiKey,
  docFor,
  dropFile,
  freePort,
  httpGet,
  sha256,
  shuffled,
  startPoller,
  writeFaultConfig,
} from '../helpers/faults.js';
import { pendingDrops } from '../helpers/drops.js';
import { dropPrefix, uniquePrefix } from '../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';

const ROUNDS = SLOW_FAULTS ? 4 : 2;
const VERSIONS = 40;
const NAMES = [
  'site_live_redstone_soccer.json',
  'site_pregame_redstone_soccer.json',
  'site_live_silverline.json',
  'site_livepre_oddsport.json',
  'site_live_hillview_tennis.json',
];

describe('fault: versions out of order, several workers, readers polling', () => {
  const prefix = uniquePrefix('faults-order');
  const running: RunningOddsfiles[] = [];

  afterAll(async () => {
    for (const r of running) await r.kill();
    await dropPrefix(prefix);
  });

  it(`never shows a reader an older version after a newer one (${ROUNDS} rounds × ${NAMES.length} files × ${VERSIONS} versions)`, async () => {
    const dataDir = await makeDataDir('faults-order');
    const inbox = join(dataDir, 'inbox');
    const [port1, port2] = [await freePort(), await freePort()];
    const configFile = await writeFaultConfig(dataDir, 'ingest:\n  rescan: 1s\n');
    const env = baseEnv(dataDir, prefix, { ODDSFILES_CONFIG: configFile, PORT: String(port1) });
    const key = await createApiKey(env);
    running.push(await startOddsfiles(env));
    running.push(await startOddsfiles(env, ['start', '--roles', 'worker']));
    running.push(await startOddsfiles(env, ['start', '--roles', 'worker']));
    running.push(await startOddsfiles({ ...env, PORT: String(port2) }, ['start', '--roles', 'reader']));
    const urls = [`http://127.0.0.1:${port1}`, `http://127.0.0.1:${port2}`];

    const book = new VersionBook();
    const feeds = NAMES.map((n) => EXAMPLE_FEEDS.find((f) => f.filename === n)!);
    const pollers = urls.flatMap((u, i) => [0, 1].map((k) => startPoller({ url: () => u, key, names: NAMES, book, loops: 2, label: `reader${i + 1}.${k}` })));
    const base0 = Math.floor(Date.now() / 1000) * 1000 - 10 * 86_400_000;
    const files = await makeDataDir('faults-order-files');

    for (let round = 0; round < ROUNDS; round++) {
      const base = base0 + round * 3_600_000;
      const at = (i: number) => base + i * 1000;
      // Through the pipeline's claims: every version is processed.
      const paths: string[] = [];
      for (const [n, { f, i }] of shuffled(
        feeds.flatMap((f) => Array.from({ length: VERSIONS }, (_, i) => ({ f, i }))),
        round + 11,
      ).entries()) {
        const dir = join(files, `${round}-${n}`);
        await mkdir(dir);
        const bytes = docFor(f, at(i), 300 + ((i * 37) % 2000), { round, version: i, via: 'publish' });
        book.add(f.filename, bytes, at(i));
        await writeFile(join(dir, f.filename), bytes);
        paths.push(join(dir, f.filename));
      }
      const published = runCli(env, ['publish', '--json', ...paths], 120_000);
      // Through the inbox at the same time, older than the newest (a drop may replace another
      // in the inbox before it is claimed, as in any folder).
      for (const { f, i } of shuffled(
        feeds.flatMap((f) => Array.from({ length: VERSIONS - 1 }, (_, i) => ({ f, i }))),
        round + 99,
      )) {
        const bytes = docFor(f, at(i), 300, { round, version: i, via: 'inbox' });
        book.add(f.filename, bytes, at(i));
        await dropFile(inbox, f.filename, bytes);
      }
      const res = await published;
      expect(res.code, res.stderr).toBe(0);
      const outcomes = (JSON.parse(res.stdout) as { outcome: string }[]).map((o) => o.outcome);
      expect(
        outcomes.every((o) => ['published', 'superseded', 'unchanged'].includes(o)),
        outcomes.join(),
      ).toBe(true);
      await waitFor(async () => (await pendingDrops(inbox)).length === 0, 30_000, 'an empty inbox and .processing');
      // Both readers serve the newest of each.
      for (const u of urls) {
        await waitFor(
          async () => {
            for (const f of feeds) {
              const r = await httpGet(`${u}/v1/data/${f.filename}`, { 'x-api-key': key });
              if (r.status !== 200 || sha256(r.body) !== book.newest.get(f.filename)!.sha256) return false;
            }
            return true;
          },
          20_000,
          `${u} serving the newest versions`,
        );
      }
    }
    const reports = await Promise.all(pollers.map((p) => p.stop()));
    const summary = reports.map((r) => ({ requests: r.requests, ok: r.ok, statuses: r.statuses, violations: r.violations.length }));
    console.info(JSON.stringify({ test: 'faults.ordering', versions: book.bySha.size, pollers: summary }));
    for (const r of reports) expect(r.violations).toEqual([]);
    for (const r of reports) expect(r.ok).toBeGreaterThan(50);
  }, 300_000);
});
