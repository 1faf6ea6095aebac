/**
 * A Redis that loses its last writes (restarted on an append-only file cut back, as `appendfsync
 * everysec` loses up to a second of them) under a running service, with a private redis-server.
 * One file's two newest versions are lost from the catalog; other feeds are dropped after the
 * restart, so new commits take the lost commits' seqs. The newest version must come back, in
 * Redis's catalog, in manifest.json and for a reader started after the loss, and stay:
 * - when the manifest had covered the lost versions: the catalog is restored from it;
 * - when no manifest had (they were lost before it was written): their claims stay in
 *   .processing, and recovery publishes them again.
 */
import { mkdir, readdir, readFile, rename, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../../src/catalog/types.js';
import { EXAMPLE_FEEDS } from '../fixtures/corpus.js';
import { createApiKey, docFor, dropFile, freePort, readCatalogAt, startPrivateRedis, writeFaultConfig, type PrivateRedis } from '../helpers/faults.js';
import { uniquePrefix } from '../helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';

const [LOST, ...OTHERS] = EXAMPLE_FEEDS.slice(0, 7) as [(typeof EXAMPLE_FEEDS)[number], ...(typeof EXAMPLE_FEEDS)[number][]];

interface Setup {
  readonly dataDir: string;
  readonly inbox: string;
  readonly redis: PrivateRedis;
  readonly prefix: string;
  readonly env: Record<string, string>;
  readonly svc: RunningOddsfiles;
  readonly key: string;
}

const started: { redis?: PrivateRedis; services: RunningOddsfiles[] }[] = [];

afterEach(async () => {
  for (const s of started.splice(0)) {
    for (const svc of s.services) await svc.kill();
    await s.redis?.stop();
  }
});

async function setUp(label: string): Promise<Setup> {
  const dataDir = await makeDataDir(label);
  const run: (typeof started)[number] = { services: [] };
  started.push(run);
  const redis = await startPrivateRedis(join(dataDir, 'private-redis'));
  run.redis = redis;
  const configFile = await writeFaultConfig(dataDir, 'ingest:\n  rescan: 1s\n');
  const prefix = uniquePrefix(label);
  const env = baseEnv(dataDir, prefix, { REDIS_URL: redis.url, ODDSFILES_CONFIG: configFile, PORT: String(await freePort()) });
  const svc = await startOddsfiles(env);
  run.services.push(svc);
  return { dataDir, inbox: join(dataDir, 'inbox'), redis, prefix, env, svc, key: await createApiKey(env) };
}

const manifestPath = (s: Setup) => join(s.dataDir, 'store', 'manifest.json');
const claims = async (s: Setup) => (await readdir(join(s.inbox, '.processing')).catch(() => [])).filter((n) => !n.startsWith('.'));

async function manifestEntry(s: Setup, filename: string): Promise<CatalogEntry | undefined> {
  try {
    return (JSON.parse(await readFile(manifestPath(s), 'utf8')) as { files: Record<string, CatalogEntry> }).files[filename];
  } catch {
    return undefined;
  }
}

async function servedBy(s: Setup, base: string, filename: string): Promise<Buffer | undefined> {
  const r = await fetch(`${base}/v1/data/${filename}`, { headers: { 'x-api-key': s.key, 'accept-encoding': 'identity' } });
  return r.status === 200 ? Buffer.from(await r.arrayBuffer()) : undefined;
}

/** Drop `bytes` under `filename` and wait until the service serves them. */
async function publish(s: Setup, filename: string, bytes: Buffer): Promise<void> {
  await dropFile(s.inbox, filename, bytes);
  await waitFor(async () => (await servedBy(s, s.svc.url!, filename))?.equals(bytes) === true, 20_000, `${filename} served`);
}

/** The append-only file Redis appends to now, and its size. */
async function appendFile(redis: PrivateRedis): Promise<{ path: string; size: number }> {
  const dir = join(redis.dir, 'appendonlydir');
  const incr = (await readdir(dir)).filter((n) => n.endsWith('.incr.aof')).sort();
  const path = join(dir, incr.at(-1)!);
  return { path, size: (await stat(path)).size };
}

/**
 * Publish the first version of every file and let the store catch up (manifest written, claims
 * gone); then the two versions Redis will lose. Returns where to cut the append-only file and the
 * three versions' generated_at.
 */
async function publishThenLose(s: Setup, beforeLoss: () => Promise<void>): Promise<{ cut: { path: string; size: number }; times: number[] }> {
  const t0 = Date.now() - 600_000;
  await publish(s, LOST.filename, docFor(LOST, t0));
  for (const [i, f] of OTHERS.slice(0, 2).entries()) await publish(s, f.filename, docFor(f, t0 + i));
  await waitFor(async () => (await manifestEntry(s, OTHERS[1]!.filename)) !== undefined && (await claims(s)).length === 0, 20_000, 'the manifest');
  const cut = await appendFile(s.redis);
  await beforeLoss();
  const times = [t0, t0 + 1000, t0 + 2000];
  for (const t of times.slice(1)) await publish(s, LOST.filename, docFor(LOST, t));
  return { cut, times };
}

/** Stop Redis, cut its append-only file back to `cut`, start it again, and drop other feeds. */
async function loseAndCarryOn(s: Setup, cut: { path: string; size: number }, first: number): Promise<void> {
  await s.redis.stop();
  await truncate(cut.path, cut.size);
  await s.redis.start();
  const catalog = await readCatalogAt(s.redis.url, s.prefix);
  expect(catalog.get(LOST.filename)?.generatedAtMs, 'Redis came back without the two newest versions').toBe(first);
  // More commits than were lost: their seqs pass those the lost commits had.
  for (const f of OTHERS.slice(2)) await publish(s, f.filename, docFor(f, Date.now() - 1000));
}

async function expectNewestBack(s: Setup, newest: number): Promise<void> {
  await waitFor(
    async () => (await readCatalogAt(s.redis.url, s.prefix)).get(LOST.filename)?.generatedAtMs === newest,
    30_000,
    "the newest version in Redis's catalog",
  );
  await waitFor(async () => (await manifestEntry(s, LOST.filename))?.generatedAtMs === newest, 20_000, 'the newest version in the manifest');
  // A reader started after the loss serves it, and every other feed is in the manifest.
  const later = await startOddsfiles({ ...s.env, PORT: String(await freePort()) }, ['start', '--roles', 'reader']);
  started.at(-1)!.services.push(later);
  expect((await servedBy(s, later.url!, LOST.filename))?.equals(docFor(LOST, newest))).toBe(true);
  for (const f of OTHERS) expect(await manifestEntry(s, f.filename), f.filename).toBeDefined();
  await waitFor(async () => (await claims(s)).length === 0, 30_000, 'every claim settled');
}

describe('fault: Redis loses its last writes under a running service', () => {
  it('restores versions the manifest held from it, when new commits take the lost seqs', async () => {
    const s = await setUp('faults-lost-covered');
    const { cut, times } = await publishThenLose(s, async () => undefined);
    await waitFor(async () => (await manifestEntry(s, LOST.filename))?.generatedAtMs === times[2] && (await claims(s)).length === 0, 20_000, 'the manifest');
    await loseAndCarryOn(s, cut, times[0]!);
    await expectNewestBack(s, times[2]!);
    // Stays: a later periodic check re-reads the whole catalog.
    await new Promise((r) => setTimeout(r, 11_000));
    expect((await readCatalogAt(s.redis.url, s.prefix)).get(LOST.filename)?.generatedAtMs).toBe(times[2]);
    expect((await manifestEntry(s, LOST.filename))?.generatedAtMs).toBe(times[2]);
  }, 120_000);

  it('publishes again versions no manifest held, from their claims', async () => {
    const s = await setUp('faults-lost-uncovered');
    // The manifest cannot be written while the two versions are published (a folder in its place):
    // their claims wait in .processing when Redis loses them.
    const aside = `${manifestPath(s)}.aside`;
    const { cut, times } = await publishThenLose(s, async () => {
      await rename(manifestPath(s), aside);
      await mkdir(join(manifestPath(s), 'blocked'), { recursive: true });
    });
    expect((await claims(s)).length, 'the lost versions wait for a manifest').toBe(2);
    expect((await manifestEntry(s, LOST.filename))?.generatedAtMs).toBeUndefined();
    await rm(manifestPath(s), { recursive: true });
    await writeFile(manifestPath(s), await readFile(aside));
    await rm(aside);
    await loseAndCarryOn(s, cut, times[0]!);
    await expectNewestBack(s, times[2]!);
  }, 120_000);
});
