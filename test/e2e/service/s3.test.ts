/**
 * End to end on S3, in the production shape: the real `oddsfiles` command started once per role
 * (`start --roles watcher`, `--roles worker` twice, `--roles reader` twice, each reader on its own
 * free port), all sharing one REDIS_PREFIX, one INBOX_DIR and REJECTED_DIR, and one s3rver bucket
 * as the published store (STORE_URL=s3://bucket/prefix over HTTP). The generated corpus goes in
 * through the drop folder; what comes out is checked in the bucket itself (read with the AWS SDK,
 * not through the project's Store), in REJECTED_DIR, and over HTTP from both readers.
 */
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../../../src/catalog/types.js';
import { parseMember } from '../../../src/catalog/history-index.js';
import { storedHistory } from '../../../src/ingest/background/history-log.js';
import { EXAMPLE_FEEDS, generateCorpus, type FixtureCase } from '../../fixtures/corpus.js';
import { startCluster, type Cluster } from '../../helpers/cluster.js';
import { drop, pendingDrops, rejectionRecords, tinyDoc } from '../../helpers/drops.js';
import { catalogSeq, readCatalog, sha256 } from '../../helpers/published.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { bucketReader, storePrefixOf, type BucketReader } from '../../helpers/s3/bucket.js';
import { startS3rver, type RunningS3rver } from '../../helpers/s3/s3rver.js';
import { startTcpGate, type TcpGate } from '../../helpers/tcp-gate.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type CliResult, type RunningOddsfiles } from '../../helpers/service.js';

const corpus = generateCorpus();
const group = (g: FixtureCase['group']) => corpus.filter((c) => c.group === g);
const valid = group('valid');
const validBytes = new Map(valid.map((c) => [c.filename, c.bytes]));
const KEEP_VERSIONS = 3;

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

async function createKey(env: Record<string, string>, name: string): Promise<string> {
  const res = await runCli(env, ['keys', 'create', '--name', name, '--plan', 'pro']);
  if (res.code !== 0) throw new Error(`keys create failed (${res.code}): ${res.stderr}`);
  return res.stdout.trim();
}

describe('end to end on S3: one watcher, two workers, two readers', () => {
  const prefix = uniquePrefix('e2e-s3');
  let s3: RunningS3rver;
  /** Between the services and s3rver: closing it makes S3 unreachable for them (not for `bucket`). */
  let gate: TcpGate;
  let bucket: BucketReader;
  let base: string;
  let dataDir: string;
  let inbox: string;
  let rejectedDir: string;
  let env: Record<string, string>;
  let cluster: Cluster | undefined;
  let key: string;
  /** A reader pointed at a Redis nothing answers on, started in beforeAll (it takes ~10 s to give up). */
  let deadRedisReader: Promise<CliResult & { ms: number }>;
  const extra: RunningOddsfiles[] = [];
  const extraPrefixes: string[] = [];

  const get = (url: string, path: string, apiKey = key) => fetch(`${url}${path}`, { headers: { 'x-api-key': apiKey } });
  const readers = () => cluster!.readers.map((r) => r.url!);
  const download = async (url: string, filename: string) => {
    const res = await get(url, `/v1/data/${filename}`);
    const body = Buffer.from(await res.arrayBuffer());
    return { status: res.status, body };
  };
  const settled = () => waitFor(async () => (await pendingDrops(inbox)).length === 0, 30_000, 'an empty inbox', 100);
  const manifest = async () => JSON.parse((await bucket.get(`${base}manifest.json`)).toString('utf8')) as { seq: number; files: Record<string, CatalogEntry> };
  /**
   * The manifest once it has caught up with the catalog. An empty inbox does not quite promise it
   * with two workers: each removes its claims after its own manifest write, and the other may then
   * land an older snapshot over it (last writer wins in S3). The writer that raced sees the catalog
   * moved during its write, reads the manifest back and writes it again within its window
   * (src/ingest/background/manifest-sync.ts), so the manifest must reach the catalog's seq promptly.
   */
  const currentManifest = async () => {
    const seq = await catalogSeq(prefix);
    return waitFor(
      async () => {
        const m = await manifest();
        return m.seq >= seq ? m : undefined;
      },
      5_000,
      `the manifest to reach the catalog's seq ${seq}`,
      50,
    );
  };

  beforeAll(async () => {
    s3 = await startS3rver();
    gate = await startTcpGate(s3.endpoint);
    bucket = bucketReader(s3);
    base = storePrefixOf(s3.env.STORE_URL!);
    dataDir = await makeDataDir('e2e-s3');
    inbox = join(dataDir, 'shared-inbox');
    rejectedDir = join(dataDir, 'shared-rejected');
    await mkdir(inbox, { recursive: true });
    const configFile = join(dataDir, 'oddsfiles.yaml');
    await writeFile(
      configFile,
      [
        'ingest:',
        `  keep_versions: ${KEEP_VERSIONS}`,
        '  rescan: 1s',
        // History keeps as many: old objects go once both let go of them.
        `history: { max_versions: ${KEEP_VERSIONS} }`,
        // The default plans, with room for the polling of this test (limits are shared by every reader).
        'plans:',
        '  free: { allow: ["site_pregame_*"], rate: { max: 30, per: 1m } }',
        '  pro: { allow: ["*"], rate: { max: 100000, per: 1m }, history: 24h }',
        '',
      ].join('\n'),
    );
    env = baseEnv(dataDir, prefix, { ...s3.env, S3_ENDPOINT: gate.url, INBOX_DIR: inbox, REJECTED_DIR: rejectedDir, ODDSFILES_CONFIG: configFile });

    const started = Date.now();
    deadRedisReader = (async () => {
      const dead = `redis://127.0.0.1:${await closedPort()}`;
      const res = await runCli({ ...env, REDIS_URL: dead, REDIS_PREFIX: uniquePrefix('e2e-s3-dead') }, ['start', '--roles', 'reader'], 40_000);
      return { ...res, ms: Date.now() - started };
    })();
    deadRedisReader.catch(() => undefined);

    [cluster, key] = await Promise.all([startCluster(env, { workers: 2, readers: 2 }), createKey(env, 'x')]);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(extra.map((p) => p.kill()));
    await cluster?.kill();
    await deadRedisReader?.catch(() => undefined);
    bucket?.close();
    await gate?.stop();
    await s3?.stop();
    await Promise.all([prefix, ...extraPrefixes].map((p) => dropPrefix(p)));
  });

  it('runs each role in its own process, the readers on ports of their own', () => {
    expect(cluster!.all).toHaveLength(5);
    for (const p of cluster!.all) expect(p.proc.exitCode).toBeNull();
    const [a, b] = readers();
    expect(a).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(b).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(a).not.toBe(b);
    expect(cluster!.watcher.url).toBeUndefined();
    for (const w of cluster!.workers) expect(w.url).toBeUndefined();
    const started = cluster!.all.map((p) => p.logs.find((l) => l.msg === 'oddsfiles started')!);
    expect(started.map((l) => l.roles)).toEqual([['watcher'], ['worker'], ['worker'], ['reader'], ['reader']]);
    for (const l of started) {
      expect(l.store).toBe(s3.env.STORE_URL);
      expect(l.prefix).toBe(prefix);
    }
  });

  it('publishes every valid drop into the bucket byte for byte, and both readers serve it byte for byte', async () => {
    expect(valid).toHaveLength(38);
    await Promise.all(valid.map((c) => drop(inbox, c.filename, c.bytes)));
    await waitFor(async () => (await readCatalog(prefix)).size === 38, 30_000, '38 published feeds', 100);
    await settled();

    // In the bucket: every version object under <prefix>/objects/<filename>/<sha256>.json.
    const catalog = await readCatalog(prefix);
    for (const c of valid) {
      const entry = catalog.get(c.filename)!;
      expect(entry.sha256, c.filename).toBe(sha256(c.bytes));
      expect(entry.object).toBe(`objects/${c.filename}/${entry.sha256}.json`);
      expect((await bucket.get(`${base}${entry.object}`)).equals(c.bytes), c.filename).toBe(true);
    }
    // The manifest lists every published file, as the catalog has it.
    const m = await currentManifest();
    expect(Object.keys(m.files).sort()).toEqual(valid.map((c) => c.filename).sort());
    for (const [name, e] of Object.entries(m.files)) expect(e.sha256, name).toBe(catalog.get(name)!.sha256);
    // Nothing went to the local disk: no filesystem store under DATA_DIR.
    expect(existsSync(join(dataDir, 'store'))).toBe(false);

    // Both workers took part (horizontal scaling over one queue), and every drop was settled once.
    const published = cluster!.workers.map((w) => w.logs.filter((l) => l.msg === 'drop published').length);
    expect(
      published.every((n) => n > 0),
      `published per worker: ${published.join(', ')}`,
    ).toBe(true);
    expect(published.reduce((a, b) => a + b, 0)).toBe(38);

    for (const url of readers()) {
      await waitFor(
        async () => {
          const res = await get(url, '/v1/files');
          return res.status === 200 && ((await res.json()) as { files: string[] }).files.length === 38;
        },
        10_000,
        `${url} to list 38 files`,
        100,
      );
      const list = (await (await get(url, '/v1/files')).json()) as { files: string[] };
      expect(list.files).toEqual(valid.map((c) => c.filename).sort());
      for (const c of valid) {
        const { status, body } = await download(url, c.filename);
        expect(status, `${url} ${c.filename}`).toBe(200);
        expect(body.equals(c.bytes), `${url} ${c.filename}`).toBe(true);
      }
    }
  });

  it('publishes the edge cases as the corpus expects (BOM stripped, generated_at stamped), in the bucket and from both readers', async () => {
    const edge = group('edge');
    expect(edge.length).toBeGreaterThan(0);
    const before = Date.now();
    await Promise.all(edge.map((c) => drop(inbox, c.filename, c.bytes)));
    await settled();
    const catalog = await waitFor(
      async () => {
        const cat = await readCatalog(prefix);
        return edge.every((c) => cat.get(c.filename)?.sha256 !== sha256(validBytes.get(c.filename)!)) ? cat : undefined;
      },
      20_000,
      'edge cases published',
      100,
    );

    const check = (c: FixtureCase, bytes: Buffer, where: string) => {
      if (c.name === 'utf8-bom') {
        expect(bytes.equals(c.bytes.subarray(3)), where).toBe(true);
        expect(() => JSON.parse(bytes.toString('utf8'))).not.toThrow();
      } else if (c.name === 'no-generated-at') {
        const doc = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
        expect(Object.keys(doc)[0], where).toBe('generated_at');
        const stamped = Date.parse(doc.generated_at as string);
        expect(stamped).toBeGreaterThanOrEqual(before - 1000);
        expect(stamped).toBeLessThanOrEqual(Date.now());
        expect(doc.generated_at).toBe(catalog.get(c.filename)!.generatedAt);
        const { generated_at: _stamp, ...rest } = doc;
        expect(rest, where).toEqual(JSON.parse(c.bytes.toString('utf8')));
      } else {
        expect(bytes.equals(c.bytes), where).toBe(true);
      }
    };
    for (const c of edge) {
      const entry = catalog.get(c.filename)!;
      const stored = await bucket.get(`${base}${entry.object}`);
      expect(sha256(stored)).toBe(entry.sha256);
      check(c, stored, `bucket ${c.name}`);
      for (const url of readers()) {
        const served = await waitFor(
          async () => {
            const { status, body } = await download(url, c.filename);
            return status === 200 && sha256(body) === entry.sha256 ? body : undefined;
          },
          10_000,
          `${url} to serve the ${c.name} version`,
          100,
        );
        check(c, served, `${url} ${c.name}`);
      }
    }
    const m = await currentManifest();
    for (const c of edge) expect(m.files[c.filename]!.sha256, c.name).toBe(catalog.get(c.filename)!.sha256);
  });

  it('rejects every invalid drop with its reason into REJECTED_DIR, and leaves catalog, manifest and readers alone', async () => {
    const invalid = group('invalid');
    const catalogBefore = await readCatalog(prefix);
    const manifestBefore = await currentManifest();
    await Promise.all(invalid.map((c) => drop(inbox, c.filename, c.bytes)));
    const reasons = await waitFor(
      async () => {
        const records = await rejectionRecords(rejectedDir);
        return records.length === invalid.length ? records : undefined;
      },
      30_000,
      'every invalid drop rejected',
      100,
    );
    await settled();
    for (const c of invalid) {
      const r = reasons.find((x) => x.filename === c.filename)!;
      expect(r, c.name).toBeDefined();
      if (c.expected.reason !== 'any') expect(r.reason, c.name).toBe(c.expected.reason);
      expect(Object.keys(r).sort()).toEqual(['detail', 'filename', 'id', 'reason', 'received_at']);
      expect((await readFile(join(rejectedDir, r.id!, c.filename))).equals(c.bytes), c.name).toBe(true);
    }
    // Both workers share REJECTED_DIR: the rejections were split between them, all in one place.
    const rejectedBy = cluster!.workers.map((w) => w.logs.filter((l) => l.msg === 'drop rejected').length);
    expect(rejectedBy.reduce((a, b) => a + b, 0)).toBe(invalid.length);

    expect(await readCatalog(prefix)).toEqual(catalogBefore);
    expect((await manifest()).seq).toBe(manifestBefore.seq);
    const list = await runCli(env, ['rejected', 'list', '--json']);
    expect(list.code, list.stderr).toBe(0);
    expect((JSON.parse(list.stdout) as unknown[]).length).toBe(invalid.length);
    for (const url of readers()) {
      const res = await get(url, '/v1/files');
      expect(((await res.json()) as { files: string[] }).files).toHaveLength(38);
    }
  });

  it(`garbage-collects old versions in the bucket: ${KEEP_VERSIONS} objects remain per filename (ingest.keep_versions, history.max_versions); history lists and serves them`, async () => {
    const edgeNames = new Set(group('edge').map((c) => c.filename));
    const feed = EXAMPLE_FEEDS.find((f) => !edgeNames.has(f.filename) && f.kind === 'live' && f.sport !== null)!;
    const dir = `${base}objects/${feed.filename}/`;
    expect(await bucket.list(dir)).toEqual([`${dir}${sha256(validBytes.get(feed.filename)!)}.json`]);

    const t0 = Date.now() - 10 * 60_000;
    const versions: Buffer[] = [];
    for (let i = 1; i <= 5; i++) {
      const bytes = tinyDoc(feed.bookmaker, feed.sport, new Date(t0 + i * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z'), { v: i });
      versions.push(bytes);
      // One at a time: a drop replaced in the inbox before it is claimed is never published.
      await drop(inbox, feed.filename, bytes);
      await waitFor(async () => (await readCatalog(prefix)).get(feed.filename)?.sha256 === sha256(bytes), 15_000, `version ${i} published`, 50);
    }
    await settled();
    // 6 versions were published (the corpus one and these 5); the oldest are deleted from the
    // bucket (after the manifest that no longer names them is written, so give it a moment).
    const kept = versions
      .slice(-KEEP_VERSIONS)
      .map((b) => `${dir}${sha256(b)}.json`)
      .sort();
    const listed = await waitFor(
      async () => {
        const keys = await bucket.list(dir);
        return keys.length <= KEEP_VERSIONS ? keys : undefined;
      },
      10_000,
      `at most ${KEEP_VERSIONS} objects under ${dir}`,
      100,
    ).catch(async () => bucket.list(dir));
    expect(listed).toEqual(kept);
    expect((await currentManifest()).files[feed.filename]!.sha256).toBe(sha256(versions.at(-1)!));
    for (const url of readers()) {
      await waitFor(
        async () => {
          const { status, body } = await download(url, feed.filename);
          return status === 200 && body.equals(versions.at(-1)!);
        },
        10_000,
        `${url} to serve the newest version`,
        100,
      );
    }
    // History on both readers: the kept versions newest first, each one's bytes from the bucket.
    const keptBytes = versions.slice(-KEEP_VERSIONS).reverse();
    for (const url of readers()) {
      const res = await get(url, `/v1/history/${feed.filename}`);
      expect(res.status).toBe(200);
      const listedVersions = ((await res.json()) as { versions: { etag: string; sha256: string }[] }).versions;
      expect(listedVersions.map((v) => v.sha256)).toEqual(keptBytes.map((b) => sha256(b)));
      const oldest = await get(url, `/v1/history/${feed.filename}/${listedVersions.at(-1)!.etag.slice(1, -1)}`);
      expect(oldest.status).toBe(200);
      expect(Buffer.from(await oldest.arrayBuffer()).equals(keptBytes.at(-1)!)).toBe(true);
    }
    // The bucket's history records (the index is rebuilt from them) name exactly the retained
    // publications: written in the background after the manifest, whichever of the two workers
    // trimmed the older ones.
    const fromBucket = {
      get: (k: string) => bucket.get(`${base}${k}`),
      list: async (p: string) => (await bucket.list(`${base}${p}`)).map((k) => k.slice(base.length)),
    };
    const keptShas = keptBytes.map((b) => sha256(b)).join();
    await waitFor(
      async () =>
        (await storedHistory(fromBucket, feed.filename))
          .map((m) => parseMember(m)!.sha256)
          .reverse()
          .join() === keptShas,
      15_000,
      'history records',
      100,
    );
    // Every object in the bucket still hashes to its name: nothing partial was left behind.
    for (const k of await bucket.list(`${base}objects/`)) {
      const m = /\/([0-9a-f]{64})\.json$/.exec(k);
      expect(m, k).not.toBeNull();
      expect(sha256(await bucket.get(k)), k).toBe(m![1]);
    }
  });

  it('while S3 is unreachable, both readers keep serving from memory and say 503 on /readyz; a drop waits and is published once S3 is back', async () => {
    const edgeNames = new Set(group('edge').map((c) => c.filename));
    const feed = EXAMPLE_FEEDS.find((f) => !edgeNames.has(f.filename) && f.kind === 'pregame')!;
    const before = await readCatalog(prefix);
    const served = valid.filter((c) => !edgeNames.has(c.filename) && before.get(c.filename)!.sha256 === sha256(c.bytes));
    expect(served.length).toBeGreaterThan(20);
    const retriesBefore = cluster!.workers.reduce((n, w) => n + w.logs.filter((l) => l.msg === 'drop will be retried').length, 0);

    await gate.close();
    try {
      for (const url of readers()) {
        await waitFor(async () => (await fetch(`${url}/readyz`)).status === 503, 5_000, `${url}/readyz to say 503`, 100);
      }
      const next = tinyDoc(feed.bookmaker, feed.sport, new Date(Date.now() - 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'), { outage: true });
      await drop(inbox, feed.filename, next);
      for (const url of readers()) {
        for (const c of served) {
          const { status, body } = await download(url, c.filename);
          expect(status, `${url} ${c.filename}`).toBe(200);
          expect(body.equals(c.bytes), `${url} ${c.filename}`).toBe(true);
        }
      }
      // The version object cannot be written: nothing is committed, the drop waits (inbox or
      // .processing) and its job is retried with backoff.
      await waitFor(
        () => cluster!.workers.reduce((n, w) => n + w.logs.filter((l) => l.msg === 'drop will be retried').length, 0) > retriesBefore,
        10_000,
        'a retry to be scheduled',
        100,
      );
      expect((await readCatalog(prefix)).get(feed.filename)!.sha256).toBe(before.get(feed.filename)!.sha256);
      expect((await pendingDrops(inbox)).some((p) => p.endsWith(feed.filename))).toBe(true);
      const { body: still } = await download(readers()[0]!, feed.filename);
      expect(sha256(still)).toBe(before.get(feed.filename)!.sha256);

      await gate.open();
      await waitFor(async () => (await readCatalog(prefix)).get(feed.filename)?.sha256 === sha256(next), 20_000, 'the waiting drop to be published', 100);
      await settled();
      for (const url of readers()) {
        await waitFor(async () => (await download(url, feed.filename)).body.equals(next), 10_000, `${url} to serve it`, 100);
        await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 10_000, `${url}/readyz to say 200 again`, 100);
      }
      expect((await currentManifest()).files[feed.filename]!.sha256).toBe(sha256(next));
    } finally {
      await gate.open();
    }
  });

  it('a reader on a fresh REDIS_PREFIX (Redis up, catalog empty) serves nothing, though the store holds a manifest', async () => {
    const fresh = uniquePrefix('e2e-s3-fresh');
    extraPrefixes.push(fresh);
    const freshEnv = { ...env, REDIS_PREFIX: fresh };
    const freshKey = await createKey(freshEnv, 'fresh');
    const reader = await startOddsfiles(freshEnv, ['start', '--roles', 'reader']);
    extra.push(reader);
    const url = reader.url!;
    await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 10_000, 'the fresh reader to be ready', 100);
    const files = await get(url, '/v1/files', freshKey);
    expect(files.status).toBe(200);
    expect(await files.json()).toEqual({ files: [] });
    for (const c of valid.slice(0, 5)) {
      const res = await get(url, `/v1/data/${c.filename}`, freshKey);
      expect(res.status, c.filename).toBe(404);
      await res.arrayBuffer();
    }
    // The other deployment's key means nothing here: keys live under the prefix too.
    expect((await get(url, '/v1/files', key)).status).toBe(401);
    // The manifest of the shared store is still full: the catalog in Redis, not the store, decides.
    expect(Object.keys((await manifest()).files)).toHaveLength(38);
    expect(await reader.stop()).toBe(0);
  });

  it('a reader whose Redis does not answer does not start: it exits 1 after about 10 s, naming Redis', async () => {
    // startService waits for its Redis command connection (whenReady, 10 s) before the reader
    // role is built, so the reader's own fall-back to the store's manifest (src/reader/state.ts)
    // only helps a reader that was already running when Redis went away. See docs/production.md.
    const res = await deadRedisReader;
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/Redis/);
    expect(res.ms).toBeLessThan(30_000);
  });

  it('every process stops on SIGTERM with exit code 0', async () => {
    const codes = await cluster!.stop();
    expect(codes).toEqual([0, 0, 0, 0, 0]);
  });
});
