/**
 * What a reader process holds and keeps current: the published set and the API keys. Subscribes
 * to the catalog and keys channels first, then loads both (catalog from Redis, else the store's
 * manifest), retries until loaded, re-reads both every `refreshMs`, and again whenever the
 * subscriber reconnects (announcements may have been missed meanwhile).
 *
 * With `carried`, it also subscribes to the bytes channel: a version a worker carried ahead of
 * its commit (src/catalog/carried.ts) arrives before its announcement on the same connection, and
 * is held without reading the store.
 */
import type { Redis } from 'ioredis';
import type { Catalog } from '../catalog/redis-catalog.js';
import type { Config } from '../config.js';
import type { FeedRegistry } from '../feeds/registry.js';
import { createKeyRing, type KeyRing } from '../keys/ring.js';
import { createKeyStore } from '../keys/store.js';
import type { Logger } from '../log.js';
import { redisKeys } from '../redis/key-names.js';
import type { Store } from '../store/store.js';
import { createPublishedCache, type PublishedCache } from './data/cache.js';
import { withTimeout } from '../timeout.js';

export interface ReaderStateDeps {
  readonly config: Config;
  /** Command connection (client role). */
  readonly redis: Redis;
  /** Subscriber connection: this state subscribes it to the catalog and keys channels. */
  readonly subscriber: Redis;
  readonly store: Store;
  readonly catalog: Catalog;
  readonly log: Logger;
  readonly registry: FeedRegistry;
  /**
   * Take the versions workers carry ahead of their announcements (default true). A reader in the
   * worker's own process is handed its bytes directly and leaves it off, so that the worker,
   * seeing nobody listen, stops carrying (src/ingest/publish/carry.ts).
   */
  readonly carried?: boolean;
}

export interface ReaderState {
  readonly published: PublishedCache;
  readonly keys: KeyRing;
  /** Both the published set and the keys have been loaded. */
  loaded(): boolean;
  /** Resolves once loaded (it may take long while Redis and the store are both away). */
  readonly ready: Promise<void>;
  /** One full re-read of both (what the periodic timer does). */
  refresh(): Promise<void>;
  close(): Promise<void>;
}

const FIRST_RETRY_MS = 250;
const MAX_RETRY_MS = 5000;

/** Start loading; resolves after the first attempt (loaded unless Redis and store are both away). */
export async function createReaderState(deps: ReaderStateDeps): Promise<ReaderState> {
  const { config, redis, subscriber, store, catalog, log, registry } = deps;
  const keys = redisKeys(config.redis.prefix);
  const published = createPublishedCache({ catalog, store, registry, log });
  const ring = createKeyRing({ source: createKeyStore({ redis, keys, plans: config.plans }), plans: config.plans, log, publishRate: config.publish.rate });
  const loaded = () => published.loaded && ring.loaded;
  let closed = false;
  const timers = new Set<NodeJS.Timeout>();

  const channels = deps.carried === false ? [keys.catalogChannel, keys.apiKeysChannel] : [keys.catalogBytesChannel, keys.catalogChannel, keys.apiKeysChannel];
  const catalogChannel = Buffer.from(keys.catalogChannel);
  const bytesChannel = Buffer.from(keys.catalogBytesChannel);
  const apiKeysChannel = Buffer.from(keys.apiKeysChannel);
  // Buffers, not strings: a carried version is never decoded (auth-failures.ts listens the same way).
  const onMessage = (channel: Buffer, message: Buffer) => {
    if (channel.equals(bytesChannel)) published.carried(message);
    else if (channel.equals(catalogChannel)) published.handleMessage(message.toString());
    else if (channel.equals(apiKeysChannel)) ring.handleMessage(message.toString());
  };
  let connectedOnce = subscriber.status === 'ready';
  const onReady = () => {
    if (!connectedOnce) {
      connectedOnce = true;
      return;
    }
    log.info('subscriber reconnected; re-reading the catalog and keys');
    void refresh();
  };
  subscriber.on('messageBuffer', onMessage);
  subscriber.on('ready', onReady);
  const subscribed = subscriber.subscribe(...channels);
  subscribed.catch((err: unknown) => log.warn({ err }, 'subscribing to announcements failed'));

  const refreshPublished = () =>
    published.refresh().catch((err: unknown) => {
      log.warn({ err }, 'cannot read the catalog (Redis) nor the manifest (store); serving what is held');
      throw err;
    });
  const reloadKeys = () =>
    withTimeout(ring.reload(), 3000, 'loading API keys').catch((err: unknown) => {
      log.warn({ err: { message: (err as Error).message } }, 'cannot load API keys from Redis; using the ones held');
      throw err;
    });
  const refresh = async () => {
    await Promise.allSettled([refreshPublished(), reloadKeys()]);
  };

  const later = (fn: () => void, ms: number) => {
    if (closed) return;
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    t.unref();
    timers.add(t);
  };

  // Retry the first load with backoff until both parts are in.
  let resolveReady!: () => void;
  const ready = new Promise<void>((r) => (resolveReady = r));
  const attempt = async (delay: number): Promise<void> => {
    if (closed) return;
    const tasks: Promise<unknown>[] = [];
    if (!published.loaded) tasks.push(refreshPublished());
    if (!ring.loaded) tasks.push(reloadKeys());
    await Promise.allSettled(tasks);
    if (loaded()) {
      log.info({ files: published.filenames().length, keys: ring.size }, 'reader loaded the published files and keys');
      resolveReady();
    } else {
      later(() => void attempt(Math.min(delay * 2, MAX_RETRY_MS)), delay);
    }
  };

  // Subscribe before the first read, so no announcement falls between the two.
  await Promise.all([withTimeout(subscribed, 2000, 'subscribing').catch(() => undefined), redis.status === 'ready' ? undefined : waitForReady(redis, 2000)]);
  await attempt(FIRST_RETRY_MS);

  const interval = setInterval(() => void refresh(), Math.max(1000, config.reader.refreshMs));
  interval.unref();

  return {
    published,
    keys: ring,
    loaded,
    ready,
    refresh,
    async close() {
      closed = true;
      clearInterval(interval);
      for (const t of timers) clearTimeout(t);
      published.close();
      subscriber.off('messageBuffer', onMessage);
      subscriber.off('ready', onReady);
      if (subscriber.status === 'ready') {
        await withTimeout(subscriber.unsubscribe(...channels), 1000, 'unsubscribing').catch(() => undefined);
      }
      await withTimeout(published.idle(), 2000, 'finishing loads').catch(() => undefined);
    },
  };
}

/** Wait (at most `ms`) for a connection that is still connecting; commands fail fast until then. */
function waitForReady(redis: Redis, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(t);
      redis.off('ready', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    t.unref();
    redis.once('ready', done);
  });
}
