/**
 * A Redis that loses everything (FLUSHALL) under a running service, with a private redis-server:
 * the workers restore the catalog, the history index and the API keys from the store. Every file
 * is served again within 10 s with the same ETags, by the running reader and by one started after
 * the loss; the keys made before still authenticate; /v1/history still lists the kept versions;
 * open streams are told to start again (`reset`), a long-poll held across the loss gets 410, and
 * old positions are refused (410).
 * Nothing is published again: each restored entry keeps its published_at.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { storedHistory } from '../../src/ingest/background/history-log.js';
import { createFsStore } from '../../src/store/fs-store.js';
import { EXAMPLE_FEEDS } from '../fixtures/corpus.js';
import { createApiKey, docFor, dropFile, freePort, readCatalogAt, startPrivateRedis, type PrivateRedis } from '../helpers/faults.js';
import { uniquePrefix } from '../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';
import { openSse, type SseClient } from '../helpers/sse.js';

const FILES = EXAMPLE_FEEDS.slice(0, 8);

describe('fault: Redis loses its data under a running service', () => {
  let redis: PrivateRedis | undefined;
  const services: RunningOddsfiles[] = [];
  const clients: SseClient[] = [];

  afterAll(async () => {
    for (const c of clients) c.close();
    for (const s of services) await s.kill();
    await redis?.stop();
  });

  it('restores the catalog, the history index and the keys from the store', async () => {
    const dataDir = await makeDataDir('faults-flushall');
    const inbox = join(dataDir, 'inbox');
    redis = await startPrivateRedis(join(dataDir, 'private-redis'));
    const configFile = join(dataDir, 'oddsfiles.yaml');
    await writeFile(configFile, 'plans:\n  pro: { allow: ["*"], history: 24h }\n');
    const prefix = uniquePrefix('faults-flushall');
    const env = baseEnv(dataDir, prefix, { REDIS_URL: redis.url, ODDSFILES_CONFIG: configFile, PORT: String(await freePort()) });
    const svc = await startOddsfiles(env);
    services.push(svc);
    const key = await createApiKey(env);
    const get = (base: string, path: string) => fetch(`${base}${path}`, { headers: { 'x-api-key': key, 'accept-encoding': 'identity' } });

    // Every file once, the first one twice (two versions in its history).
    let t = Date.now() - 600_000;
    const last = new Map<string, Buffer>();
    for (const feed of [...FILES, FILES[0]!]) {
      const bytes = docFor(feed, (t += 1000));
      last.set(feed.filename, bytes);
      await dropFile(inbox, feed.filename, bytes);
      await waitFor(async () => {
        const r = await get(svc.url!, `/v1/data/${feed.filename}`);
        return r.status === 200 && Buffer.from(await r.arrayBuffer()).equals(bytes);
      });
    }
    const etags = new Map<string, string>();
    for (const f of FILES) etags.set(f.filename, (await get(svc.url!, `/v1/data/${f.filename}`)).headers.get('etag')!);
    const before = await readCatalogAt(redis.url, prefix);
    // The store has caught up: the manifest covers every file, the key records and history records are written.
    await waitFor(async () => {
      const manifest = JSON.parse(await readFile(join(dataDir, 'store', 'manifest.json'), 'utf8')) as { files: Record<string, unknown> };
      const keys = await readFile(join(dataDir, 'store', 'keys', 'records.json'), 'utf8');
      const history = await get(svc.url!, `/v1/history/${FILES[0]!.filename}`);
      return Object.keys(manifest.files).length === FILES.length && keys.length > 0 && history.status === 200;
    }, 20_000);
    const historyBefore = (await (await get(svc.url!, `/v1/history/${FILES[0]!.filename}`)).json()) as { versions: { etag: string }[] };
    expect(historyBefore.versions).toHaveLength(2);
    const store = createFsStore(pathToFileURL(join(dataDir, 'store')).href);
    await waitFor(async () => (await storedHistory(store, FILES[0]!.filename)).length === 2, 20_000, 'the history records');

    const stream = await openSse(`${svc.url}/v1/stream`, { 'x-api-key': key });
    clients.push(stream);
    expect(stream.status).toBe(200);
    // A long-poll held from the head across the loss: told the log moved out of reach (410), not
    // handed the new log's changes as if they followed its position.
    const head = ((await (await get(svc.url!, '/v1/catalog')).json()) as { position: number }).position;
    const held = fetch(`${svc.url}/v1/changes?since=${head}&wait=30`, { headers: { 'x-api-key': key } });

    const client = new Redis(redis.url);
    try {
      await client.flushall();
    } finally {
      client.disconnect();
    }
    const lostAt = Date.now();

    // A reader started after the loss, as well as the running one.
    const later = await startOddsfiles({ ...env, PORT: String(await freePort()) }, ['start', '--roles', 'reader']);
    services.push(later);
    for (const base of [svc.url!, later.url!]) {
      await waitFor(
        async () => {
          for (const f of FILES) {
            const r = await get(base, `/v1/data/${f.filename}`);
            const body = Buffer.from(await r.arrayBuffer());
            if (r.status !== 200 || r.headers.get('etag') !== etags.get(f.filename) || !body.equals(last.get(f.filename)!)) return false;
          }
          return true;
        },
        10_000 - (Date.now() - lostAt),
        `${base} serving every file with its ETag`,
      );
    }
    expect(Date.now() - lostAt).toBeLessThan(10_000);

    // The same entries, published_at included: nothing was published again.
    const after = await readCatalogAt(redis.url, prefix);
    expect([...after.entries()].sort()).toEqual([...before.entries()].sort());
    // The history index, rebuilt from the store's records.
    const history = await waitFor(async () => {
      const r = await get(later.url!, `/v1/history/${FILES[0]!.filename}`);
      const body = r.status === 200 ? ((await r.json()) as { versions: { etag: string }[] }) : undefined;
      return body && body.versions.length === 2 ? body : undefined;
    }, 20_000);
    expect(history.versions.map((v) => v.etag)).toEqual(historyBefore.versions.map((v) => v.etag));

    // The open stream is told to start again; its old position is refused.
    const reset = await stream.next((e) => e.event === 'reset', 20_000);
    expect(reset.event).toBe('reset');
    const heldAnswer = await held;
    expect(heldAnswer.status, await heldAnswer.clone().text()).toBe(410);
    expect(((await heldAnswer.json()) as { type: string }).type).toMatch(/position-gone$/);
    const gone = await get(later.url!, '/v1/changes?since=3');
    expect(gone.status).toBe(410);

    // New drops publish into the restored catalog.
    const feed = FILES[1]!;
    const bytes = docFor(feed, (t += 1000));
    await dropFile(inbox, feed.filename, bytes);
    await waitFor(async () => {
      const r = await get(later.url!, `/v1/data/${feed.filename}`);
      return r.status === 200 && Buffer.from(await r.arrayBuffer()).equals(bytes);
    });

    // On demand: nothing is missing now, so nothing is restored.
    const recover = await runCli(env, ['recover', '--json']);
    expect(recover.code, recover.stderr).toBe(0);
    expect(JSON.parse(recover.stdout)).toMatchObject({ files: 0, keys: 0, new_epoch: false, manifest_files: FILES.length });
  }, 120_000);
});
