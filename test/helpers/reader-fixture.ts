/**
 * A reader against the real Redis (unique prefix) and a filesystem store in a temp folder:
 * publish versions through Catalog.commit (which announces them), create keys, start app
 * instances, capture log lines. No mocks.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { syncManifest } from '../../src/catalog/manifest.js';
import { createCatalog, type Catalog } from '../../src/catalog/redis-catalog.js';
import type { CatalogEntry, CommitResult } from '../../src/catalog/types.js';
import { loadConfig, type Config } from '../../src/config.js';
import { buildRegistry, parseFilename, type FeedRegistry } from '../../src/feeds/registry.js';
import { createKeyStore, type KeyStore } from '../../src/keys/store.js';
import { createLogger, type Logger } from '../../src/log.js';
import type { PublishPort } from '../../src/ports/publish.js';
import { buildReaderApp, type PressureLimits } from '../../src/reader/app.js';
import type { RateLimitCheck } from '../../src/reader/limits/rate-limit.js';
import { createReaderState, type ReaderState } from '../../src/reader/state.js';
import { createRedis } from '../../src/redis/connect.js';
import { redisKeys, type RedisKeys } from '../../src/redis/key-names.js';
import { createFsStore } from '../../src/store/fs-store.js';
import { objectKey, type Store } from '../../src/store/store.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from './redis.js';

/**
 * Pressure limits for a reader running inside a test worker: no event-loop delay check. That
 * loop is the test's too (its requests, its assertions) and on a busy machine its delay says
 * nothing about the reader, whose 503s would fail tests that are not about overload. The heap
 * check stays. Tests of the overload answer set their own limits (test/e2e/reader/edge.hostile.test.ts).
 */
export const IN_TEST_PRESSURE: PressureLimits = { maxEventLoopDelayMs: 0 };

export interface ReaderInstance {
  readonly app: FastifyInstance;
  readonly state: ReaderState;
  readonly redis: Redis;
  readonly subscriber: Redis;
  close(): Promise<void>;
}

export interface ReaderFixture {
  readonly prefix: string;
  readonly config: Config;
  readonly registry: FeedRegistry;
  readonly store: Store;
  readonly storeDir: string;
  readonly redis: Redis;
  readonly keys: RedisKeys;
  readonly catalog: Catalog;
  readonly keyStore: KeyStore;
  /** Every log line written by every instance, as text. */
  readonly logLines: string[];
  readonly log: Logger;
  /** `beforeCommit`: called with the version's sha256 and bytes once stored, before the commit (as the publish step's onPublishing). */
  publish(filename: string, doc: unknown, at?: { generatedAtMs?: number; beforeCommit?: (sha256: string, bytes: Buffer) => void }): Promise<CatalogEntry>;
  /** publish, with the bytes carried ahead of the commit as a worker does (src/catalog/carried.ts): the whole result. */
  publishCarried(filename: string, doc: unknown): Promise<CommitResult & { bytes: Buffer; carriedTo: number }>;
  syncManifest(): Promise<void>;
  start(options?: {
    rateLimit?: RateLimitCheck;
    redisUrl?: string;
    store?: Store;
    register?: (app: FastifyInstance) => void | Promise<void>;
    carried?: boolean;
    /** Overrides of the reader's settings (config.reader) for this instance. */
    reader?: Partial<Config['reader']>;
    /** With it, PUT /v1/data/{filename} publishes through it. */
    publisher?: PublishPort;
  }): Promise<ReaderInstance>;
  cleanup(): Promise<void>;
}

export async function createReaderFixture(label: string, overrides: { refreshMs?: number } = {}): Promise<ReaderFixture> {
  const prefix = uniquePrefix(label);
  const dir = await mkdtemp(join(tmpdir(), `oddsfiles-${label}-`));
  const storeDir = join(dir, 'store');
  const base = loadConfig({ env: { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix, DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'info' }, cwd: dir });
  const config: Config = { ...base, reader: { ...base.reader, refreshMs: overrides.refreshMs ?? base.reader.refreshMs } };
  const registry = buildRegistry(config.bookmakers, config.sports);
  const store = createFsStore(pathToFileURL(storeDir).href);
  const connections: Redis[] = [];
  const connect = (role: 'client' | 'subscriber', url = TEST_REDIS_URL) => {
    const c = createRedis(url, role, `${prefix}-${role}`);
    c.on('error', () => undefined);
    connections.push(c);
    return c;
  };
  const redis = connect('client');
  if (redis.status !== 'ready') await new Promise((r) => redis.once('ready', r));
  const keys = redisKeys(prefix);
  const catalog = createCatalog(redis, keys);
  const logLines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logLines.push(line);
      cb();
    },
  });
  const log = createLogger({ level: 'debug', destination: sink, pretty: false });
  const instances: ReaderInstance[] = [];
  let clock = Date.now() - 60_000;

  return {
    prefix,
    config,
    registry,
    store,
    storeDir,
    redis,
    keys,
    catalog,
    keyStore: createKeyStore({ redis, keys, plans: config.plans }),
    logLines,
    log,
    async publish(filename, doc, at = {}) {
      const { entry, bytes } = prepare(filename, doc, at);
      await store.put(entry.object, bytes, 'application/json');
      at.beforeCommit?.(entry.sha256, bytes);
      const result = await catalog.commit(entry, 10);
      return result.current;
    },
    async publishCarried(filename, doc) {
      const { entry, bytes } = prepare(filename, doc, {});
      const carried = catalog.carry(entry.sha256, bytes);
      await store.put(entry.object, bytes, 'application/json');
      const result = await catalog.commit(entry, 10);
      return { ...result, bytes, carriedTo: await carried };
    },
    async syncManifest() {
      await syncManifest(catalog, store);
    },
    async start(options = {}) {
      const url = options.redisUrl ?? TEST_REDIS_URL;
      const client = connect('client', url);
      const subscriber = connect('subscriber', url);
      const readerStore = options.store ?? store;
      const state = await createReaderState({
        config,
        redis: client,
        subscriber,
        store: readerStore,
        catalog: createCatalog(client, keys),
        log,
        registry,
        carried: options.carried ?? true,
      });
      const appConfig: Config = options.reader ? { ...config, reader: { ...config.reader, ...options.reader } } : config;
      const app = await buildReaderApp({
        config: appConfig,
        redis: client,
        store: readerStore,
        log,
        state,
        rateLimit: options.rateLimit,
        register: options.register,
        pressure: IN_TEST_PRESSURE,
        publish: options.publisher ? { port: options.publisher, registry } : undefined,
      });
      const instance: ReaderInstance = {
        app,
        state,
        redis: client,
        subscriber,
        async close() {
          await app.close();
          await state.close();
        },
      };
      instances.push(instance);
      return instance;
    },
    async cleanup() {
      for (const i of instances) await i.close().catch(() => undefined);
      for (const c of connections) c.disconnect();
      await dropPrefix(prefix);
      await rm(dir, { recursive: true, force: true });
    },
  };

  function prepare(filename: string, doc: unknown, at: { generatedAtMs?: number }): { entry: CatalogEntry; bytes: Buffer } {
    const info = parseFilename(registry, filename);
    if (!info) throw new Error(`not a feed filename: ${filename}`);
    const bytes = Buffer.isBuffer(doc) ? doc : Buffer.from(JSON.stringify(doc));
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const generatedAtMs = at.generatedAtMs ?? (clock += 1000);
    const entry: CatalogEntry = {
      filename,
      bookmaker: info.bookmaker,
      kind: info.kind,
      sport: info.sport,
      object: objectKey(filename, sha256),
      sha256,
      size: bytes.length,
      generatedAt: new Date(generatedAtMs).toISOString(),
      generatedAtMs,
      publishedAt: new Date().toISOString(),
    };
    return { entry, bytes };
  }
}

/** A document of about `bytes` bytes, in the shape of the spec's example. */
export function oddsDocument(bookmaker: string, sport: string, bytes = 2000, seed = 0): Record<string, unknown> {
  const events: unknown[] = [];
  const doc = { bookmaker, sport, generated_at: new Date().toISOString(), events };
  let size = JSON.stringify(doc).length;
  for (let i = 0; size < bytes; i++) {
    const e = {
      event_id: `ev-${seed}-${i}`,
      name: `Team ${i % 17} vs Team ${(i * 7) % 19}`,
      starts_at: new Date(Date.UTC(2030, 0, 1, i % 24)).toISOString(),
      league: `League ${i % 5}`,
      markets: [
        {
          market: '1X2',
          selections: [
            { name: '1', odds: 1.5 + (i % 10) / 10 },
            { name: 'X', odds: 3.1 + (seed % 7) / 10 },
            { name: '2', odds: 4.2 },
          ],
        },
      ],
    };
    events.push(e);
    size += JSON.stringify(e).length + 1;
  }
  return doc;
}

/** Poll until `fn` returns true or `ms` pass; resolves the elapsed time, rejects on timeout. */
export async function within(ms: number, fn: () => Promise<boolean> | boolean, stepMs = 10): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (await fn()) return Date.now() - start;
    if (Date.now() - start > ms) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
