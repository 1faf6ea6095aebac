/**
 * Fault 1, aimed: SIGKILL at an exact step of the publish, without a hook in the code. The store
 * is S3 (s3rver) behind a proxy that holds one kind of request (test/helpers/s3/trap-proxy.ts),
 * so the service is frozen exactly where the test wants it when the kill comes:
 *
 *   during the store write · after the store write, before the commit · after the commit, before
 *   the manifest (the job has ended; the claim waits for the manifest) · after the manifest and
 *   the claim's removal, while the version evicted by keep_versions is deleted
 *
 * After each restart the drop must be published (catalog, reader and manifest all say so), the
 * inbox and .processing empty, nothing rejected; a poller checks no torn body, no regression and
 * no 404 throughout.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MANIFEST_KEY, objectKey } from '../../src/store/store.js';
import { createS3Store } from '../../src/store/s3-store.js';
import type { Manifest } from '../../src/catalog/manifest.js';
import { EXAMPLE_FEEDS } from '../fixtures/corpus.js';
import {
  VersionBook,
  catalogSeqAt,
  createApiKey,
  docFor,
  dropFile,
  freePort,
  httpGet,
  readCatalogAt,
  rejectionsIn,
  sha256,
  startPoller,
  writeFaultConfig,
} from '../helpers/faults.js';
import { pendingDrops } from '../helpers/drops.js';
import { TEST_REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/redis.js';
import { startS3rver, type RunningS3rver } from '../helpers/s3/s3rver.js';
import { startTrapProxy, type TrapProxy, type TrapSpec } from '../helpers/s3/trap-proxy.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';

const FEED = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_goldcrest_tennis.json')!;
const OBJECT_PUT = /\/objects\/site_live_goldcrest_tennis\.json\/[0-9a-f]{64}\.json(\?|$)/;

const AIMS: readonly { name: string; spec: TrapSpec }[] = [
  { name: 'during the store write', spec: { method: 'PUT', path: OBJECT_PUT, when: 'before-forward' } },
  { name: 'after the store write, before the commit', spec: { method: 'PUT', path: OBJECT_PUT, when: 'after-answer' } },
  { name: 'after the commit, before the manifest', spec: { method: 'PUT', path: /\/manifest\.json(\?|$)/, when: 'before-forward' } },
  { name: 'after the manifest, deleting the evicted version', spec: { method: 'DELETE', path: OBJECT_PUT, when: 'before-forward' } },
];

describe('fault: SIGKILL aimed at each step of the publish (S3 store behind a holding proxy)', () => {
  const prefix = uniquePrefix('faults-aimed');
  const running: RunningOddsfiles[] = [];
  const book = new VersionBook();
  let s3: RunningS3rver;
  let proxy: TrapProxy;
  let env: Record<string, string>;
  let dataDir: string;
  let inbox: string;
  let url: string;
  let key: string;
  let svc: RunningOddsfiles;
  let generation = 0;
  const base = Math.floor(Date.now() / 1000) * 1000 - 86_400_000;

  let directStore: ReturnType<typeof createS3Store> | undefined;
  const direct = () => {
    // This process reads the store straight from s3rver (not through the proxy), with its test credentials.
    process.env.AWS_ACCESS_KEY_ID = s3.env.AWS_ACCESS_KEY_ID;
    process.env.AWS_SECRET_ACCESS_KEY = s3.env.AWS_SECRET_ACCESS_KEY;
    return (directStore ??= createS3Store(s3.env.STORE_URL!, { endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1' }));
  };
  const readManifest = async () => JSON.parse((await direct().get(MANIFEST_KEY)).toString('utf8')) as Manifest;
  const dropNext = async () => {
    const at = base + ++generation * 1000;
    const bytes = docFor(FEED, at, 3000, { generation });
    const v = book.add(FEED.filename, bytes, at);
    await dropFile(inbox, FEED.filename, bytes);
    return v;
  };
  const settled = async (sha: string) => {
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 40_000, 'an empty inbox and .processing');
    await waitFor(async () => (await readCatalogAt(TEST_REDIS_URL, prefix)).get(FEED.filename)?.sha256 === sha, 20_000, 'the drop committed');
    await waitFor(
      async () => {
        const res = await httpGet(`${url}/v1/data/${FEED.filename}`, { 'x-api-key': key }).catch(() => undefined);
        return res?.status === 200 && sha256(res.body) === sha;
      },
      20_000,
      'the reader serving the drop',
    );
    await waitFor(
      async () => {
        const m = await readManifest();
        return m.files[FEED.filename]?.sha256 === sha && m.seq === (await catalogSeqAt(TEST_REDIS_URL, prefix));
      },
      20_000,
      'the manifest to name the drop and match the catalog',
    );
  };

  beforeAll(async () => {
    s3 = await startS3rver();
    proxy = await startTrapProxy(s3.endpoint);
    dataDir = await makeDataDir('faults-aimed');
    inbox = join(dataDir, 'inbox');
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    const configFile = await writeFaultConfig(dataDir, 'ingest:\n  lock_duration: 2s\n  rescan: 1s\n  keep_versions: 1\nhistory:\n  max_versions: 1\n');
    env = baseEnv(dataDir, prefix, { ...s3.env, S3_ENDPOINT: proxy.endpoint, ODDSFILES_CONFIG: configFile, PORT: String(port) });
    key = await createApiKey(env);
    svc = await startOddsfiles(env);
    running.push(svc);
    // Something published under every filename, so the poller checks all of them for 404s.
    for (const f of EXAMPLE_FEEDS) {
      const bytes = docFor(f, base, 500, { file: f.filename });
      book.add(f.filename, bytes, base);
      await dropFile(inbox, f.filename, bytes);
    }
    const first = await dropNext();
    await settled(first.sha256);
  }, 120_000);

  afterAll(async () => {
    for (const r of running) await r.kill();
    await proxy?.close();
    await s3?.stop();
    await dropPrefix(prefix);
  });

  it('publishes the drop after a restart, wherever the kill landed', async () => {
    const poller = startPoller({ url: () => url, key, names: EXAMPLE_FEEDS.map((f) => f.filename), book, loops: 2, pauseMs: 5 });
    const findings: Record<string, unknown>[] = [];
    for (const aim of AIMS) {
      const previous = (await readCatalogAt(TEST_REDIS_URL, prefix)).get(FEED.filename)!;
      const trapped =
        aim.spec.method === 'DELETE'
          ? proxy.arm({ ...aim.spec, path: new RegExp(`/objects/${FEED.filename.replace(/\./g, '\\.')}/${previous.sha256}\\.json`) })
          : proxy.arm(aim.spec);
      const v = await dropNext();
      const held = await Promise.race([
        trapped,
        new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`${aim.name}: nothing reached the trap`)), 20_000)),
      ]);
      await svc.kill();
      proxy.disarm();
      const committed = (await readCatalogAt(TEST_REDIS_URL, prefix)).get(FEED.filename)?.sha256 === v.sha256;
      const inStore = await direct().exists(objectKey(FEED.filename, v.sha256));
      const manifestHas = (await readManifest()).files[FEED.filename]?.sha256 === v.sha256;
      findings.push({ aim: aim.name, held: `${held.method} ${held.path.replace(/^.*\/oddsfiles\//, '')}`, committed, inStore, manifestHas });
      console.info(JSON.stringify(findings.at(-1)));
      // The kill landed where it was aimed.
      if (aim.name === 'during the store write') expect([committed, inStore]).toEqual([false, false]);
      if (aim.name === 'after the store write, before the commit') expect([committed, inStore]).toEqual([false, true]);
      if (aim.name === 'after the commit, before the manifest') expect([committed, inStore, manifestHas]).toEqual([true, true, false]);
      if (aim.name === 'after the manifest, deleting the evicted version') {
        // The drop was settled (its claim removed) before the eviction: only garbage can be left.
        expect([committed, manifestHas]).toEqual([true, true]);
        expect(await pendingDrops(inbox)).toEqual([]);
      } else {
        expect((await pendingDrops(inbox)).length, 'the drop is still claimed').toBeGreaterThan(0);
      }

      svc = await startOddsfiles(env);
      running.push(svc);
      await settled(v.sha256);
    }
    const report = await poller.stop();
    console.info(
      JSON.stringify({ test: 'faults.aimed', findings, poller: { ...report, violations: report.violations.slice(0, 10), served: report.served.size } }),
    );
    expect(report.violations).toEqual([]);
    expect(await rejectionsIn(join(dataDir, 'rejected'))).toEqual([]);
    // keep_versions 1: after the last publish only the current version of the file should remain;
    // an eviction interrupted by the kill may leave one old object behind (garbage, reported).
    const objects = (await direct().list(`objects/${FEED.filename}/`)).length;
    console.info(JSON.stringify({ test: 'faults.aimed', objectsLeftForFile: objects }));
    expect(await svc.stop()).toBe(0);
  }, 240_000);
});
