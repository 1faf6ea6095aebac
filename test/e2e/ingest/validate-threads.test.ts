/**
 * Where a worker checks its drops, end to end: `oddsfiles start --roles watcher,worker` as a child
 * process. By default a worker on two cores or more checks drops of 64 KiB and more on a
 * validation thread (`ingest.validate_threads`, said in its `worker ready` line), and with
 * `validate_threads: 0` on its event loop; either way a large valid drop is published and a large
 * one that breaks a rule is rejected with its reason, and its metrics count where each check ran.
 * On one core (the process bound to one CPU with `taskset`), a worker alone checks on its loop and
 * one whose process also serves readers keeps its thread.
 */
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { drop, rejectionRecords } from '../../helpers/drops.js';
import { freePort } from '../../helpers/faults.js';
import { readCatalog } from '../../helpers/published.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';
import { EXAMPLE_FEEDS, generateDocument } from '../../fixtures/corpus.js';

const GOOD = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_northwind_soccer.json')!;
const BAD = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_northwind_basketball.json')!;
const generatedAt = () => new Date(Date.now() - 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** A 200 KB document whose last object names a member twice (I-JSON forbids it). */
function twiceNamed(): Buffer {
  const doc = generateDocument(BAD, { targetBytes: 200 * 1024, generatedAt: generatedAt() }).toString('utf8');
  const at = doc.lastIndexOf('}');
  return Buffer.from(`${doc.slice(0, at)},"x_extra":1,"x_extra":2${doc.slice(at)}`, 'utf8');
}

/** The worker's counts of drop checks by where they ran, from its /metrics (loopback: no token needed). */
async function checksOn(metricsPort: number): Promise<(on: 'thread' | 'loop') => number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return (on) => Number(new RegExp(`^oddsfiles_drop_checks_total\\{[^}]*on="${on}"[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1]);
}

describe('validation threads of a worker', () => {
  let svc: RunningOddsfiles | undefined;
  const prefixes: string[] = [];
  afterEach(async () => {
    await svc?.stop();
    svc = undefined;
    for (const p of prefixes.splice(0)) await dropPrefix(p);
  });

  it.each([
    { setting: 'unset', yaml: '', threads: availableParallelism() >= 2 ? 1 : 0 },
    { setting: '0', yaml: 'ingest:\n  validate_threads: 0\n', threads: 0 },
  ])('validate_threads $setting: $threads thread(s); a large drop published, a large bad one rejected', async ({ yaml, threads }) => {
    const prefix = uniquePrefix('e2e-vthreads');
    prefixes.push(prefix);
    const dataDir = await makeDataDir('e2e-vthreads');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), yaml);
    const metricsPort = await freePort();
    svc = await startOddsfiles({ ...baseEnv(dataDir, prefix), METRICS_PORT: String(metricsPort) }, ['start', '--roles', 'watcher,worker']);
    const ready = await svc.waitForLog((l) => l.msg === 'worker ready', 30_000);
    expect(ready.validateThreads).toBe(threads);

    const good = generateDocument(GOOD, { targetBytes: 200 * 1024, generatedAt: generatedAt() });
    expect(good.length).toBeGreaterThan(64 * 1024);
    await drop(join(dataDir, 'inbox'), GOOD.filename, good);
    await drop(join(dataDir, 'inbox'), BAD.filename, twiceNamed());
    const published = await waitFor(async () => (await readCatalog(prefix)).get(GOOD.filename));
    expect(published.size).toBe(good.length);
    const records = await waitFor(async () => {
      const all = await rejectionRecords(join(dataDir, 'rejected'));
      return all.find((r) => r.filename === BAD.filename);
    });
    expect(records).toMatchObject({ reason: 'not_i_json' });
    expect(records.detail).toMatch(/"x_extra" appears twice/);
    expect((await readCatalog(prefix)).has(BAD.filename)).toBe(false);
    // Its metrics count where the two checks ran (from loopback, no token needed).
    const count = await checksOn(metricsPort);
    expect(count(threads > 0 ? 'thread' : 'loop')).toBe(2);
    expect(count(threads > 0 ? 'loop' : 'thread')).toBe(0);
  });

  // Bound to one CPU, the process is a machine of one core (Node counts the CPUs it may run on).
  const taskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
  it.skipIf(!taskset).each([
    { roles: 'watcher,worker', threads: 0 },
    { roles: 'watcher,worker,reader', threads: 1 },
  ])(
    'on one core, unset: --roles $roles checks on $threads thread(s)',
    async ({ roles, threads }) => {
      const prefix = uniquePrefix('e2e-vthreads1');
      prefixes.push(prefix);
      const dataDir = await makeDataDir('e2e-vthreads1');
      const metricsPort = await freePort();
      svc = await startOddsfiles({ ...baseEnv(dataDir, prefix), METRICS_PORT: String(metricsPort) }, ['start', '--roles', roles], { cpus: '0' });
      const ready = await svc.waitForLog((l) => l.msg === 'worker ready', 30_000);
      expect(ready.validateThreads).toBe(threads);
      const good = generateDocument(GOOD, { targetBytes: 200 * 1024, generatedAt: generatedAt() });
      await drop(join(dataDir, 'inbox'), GOOD.filename, good);
      const published = await waitFor(async () => (await readCatalog(prefix)).get(GOOD.filename));
      expect(published.size).toBe(good.length);
      // Where the check ran, as the worker counts it.
      const count = await checksOn(metricsPort);
      expect(count(threads > 0 ? 'thread' : 'loop')).toBe(1);
      expect(count(threads > 0 ? 'loop' : 'thread')).toBe(0);
    },
    90_000,
  );
});
