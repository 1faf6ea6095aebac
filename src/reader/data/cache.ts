/**
 * The published set, held in memory: filename → current version with its bytes. Filled from the
 * Redis catalog (or the store's manifest when Redis is away), kept current by the announcements
 * on the catalog channel, re-read in full by refresh(). Never regresses: a version replaces the
 * held one only if it supersedes it, and only once its bytes are loaded. The store is read once
 * per version, or not at all when this process published it (offer) or a worker carried its
 * bytes ahead of its announcement (src/catalog/carried.ts); compressed variants are made
 * once per version and coding, when first asked for (variants.ts).
 */
import type { ChangeEntry } from '../../catalog/change-log.js';
import type { Catalog } from '../../catalog/redis-catalog.js';
import { parseCatalogChange } from '../../catalog/redis-catalog.js';
import { createCarriedBytes } from '../../catalog/carried.js';
import { manifestSnapshot, readManifest } from '../../catalog/manifest.js';
import type { CatalogEntry, CatalogSnapshot } from '../../catalog/types.js';
import type { FeedRegistry } from '../../feeds/registry.js';
import type { Logger } from '../../log.js';
import { objectKey, type Store } from '../../store/store.js';
import type { CompressedCoding } from './encoding.js';
import { createVariantMaker } from './variants.js';
import { loadVersion, supersedes, trustedVersion, type Variant, type Version } from './version.js';
import { withTimeout } from '../../timeout.js';

export interface PublishedCache {
  /** True once a whole catalog has been read and the loads it started have settled. */
  readonly loaded: boolean;
  /** Bumped whenever the set of servable filenames changes. */
  readonly generation: number;
  get(filename: string): Version | undefined;
  /** Published (the catalog names it) but its bytes are not in memory yet. */
  isPending(filename: string): boolean;
  /** Servable filenames, sorted. */
  filenames(): readonly string[];
  /** Re-read the whole catalog (Redis, else the manifest) and load what is new. */
  refresh(): Promise<'redis' | 'manifest'>;
  /**
   * Apply one announcement from the catalog channel. A version whose bytes were carried ahead of
   * it (carried) is held at once, with no store read.
   */
  handleMessage(message: string): void;
  /**
   * A version the change log named (read before, or after, its announcement on the channel):
   * handled as its announcement, and at most once with it (a load under way is joined).
   */
  heard(entry: CatalogEntry | ChangeEntry, seq: number): void;
  /** A message of the bytes channel: a version's bytes, carried ahead of its announcement (src/catalog/carried.ts). */
  carried(message: Buffer): void;
  /**
   * The bytes of a version this process is about to commit (sha256: of those bytes, as the
   * publish step hashed them): kept as carried bytes, so that an announcement reaching this
   * reader before the commit call returns (and so before offer) takes them instead of reading the
   * store back and hashing.
   */
  expect(sha256: string, bytes: Buffer): void;
  /**
   * A version this process has just committed, with its bytes (already hashed by the publish
   * step): held at once, with no store read; the announcement that follows finds it held.
   */
  offer(entry: CatalogEntry, seq: number, bytes: Buffer): void;
  /** The compressed variant of a held version, made on the first call (see variants.ts). */
  variant(version: Version, coding: CompressedCoding): Variant | undefined | Promise<Variant | undefined>;
  /** Resolves when no load or compression is under way. */
  idle(): Promise<void>;
  /** Whether this reader serves `filename` at all (its registry names it). */
  serves(filename: string): boolean;
  /** Call `listener` after every version it starts to hold (the change feed waits for them). */
  onInstall(listener: (version: Version) => void): () => void;
  close(): void;
}

export interface PublishedCacheDeps {
  readonly catalog: Catalog;
  readonly store: Store;
  readonly registry: FeedRegistry;
  readonly log: Logger;
  /** Make gzip and br variants when asked for (default true). */
  readonly compress?: boolean;
  readonly redisTimeoutMs?: number;
}

interface Loading {
  readonly entry: CatalogEntry;
  readonly seq: number;
  readonly done: Promise<void>;
}

const MAX_RETRY_MS = 30_000;

export function createPublishedCache(deps: PublishedCacheDeps): PublishedCache {
  const { catalog, store, registry, log } = deps;
  const compress = deps.compress ?? true;
  const versions = new Map<string, Version>();
  const known = new Set<string>();
  const loading = new Map<string, Loading>();
  const failures = new Map<string, number>();
  const timers = new Set<NodeJS.Timeout>();
  const busy = new Set<Promise<unknown>>();
  let sorted: readonly string[] = [];
  let generation = 0;
  let loaded = false;
  let closed = false;

  const track = <T>(p: Promise<T>): Promise<T> => {
    busy.add(p);
    void p.finally(() => busy.delete(p)).catch(() => undefined);
    return p;
  };
  const variant = createVariantMaker({ log, enabled: compress, track });
  const carried = createCarriedBytes();

  const installListeners = new Set<(version: Version) => void>();

  /** Hold `version` unless something at least as new is held. */
  const install = (version: Version): void => {
    const name = version.entry.filename;
    const held = versions.get(name);
    if (held && !supersedes(version.entry, version.seq, held)) return;
    versions.set(name, version);
    if (!held) {
      sorted = [...versions.keys()].sort();
      generation++;
    }
    log.debug({ filename: name, sha256: version.entry.sha256, seq: version.seq }, 'reader holds new version');
    for (const l of installListeners) l(version);
  };

  /** Start loading `entry` if it supersedes what is held and what is being loaded. */
  const consider = (entry: CatalogEntry, seq: number): Promise<void> | undefined => {
    if (closed || !registry.feeds.has(entry.filename)) return undefined;
    const name = entry.filename;
    known.add(name);
    const held = versions.get(name);
    if (held && !supersedes(entry, seq, held)) return undefined;
    const inFlight = loading.get(name);
    if (inFlight && (inFlight.entry.sha256 === entry.sha256 || !supersedes(entry, seq, inFlight))) return inFlight.done;
    const done = track(load(entry, seq));
    loading.set(name, { entry, seq, done });
    return done;
  };

  const load = async (entry: CatalogEntry, seq: number): Promise<void> => {
    const name = entry.filename;
    const attemptKey = `${name}@${entry.sha256}`;
    try {
      install(await loadVersion(entry, seq, await store.get(entry.object)));
      failures.delete(attemptKey);
    } catch (err) {
      const attempts = (failures.get(attemptKey) ?? 0) + 1;
      failures.set(attemptKey, attempts);
      const delay = Math.min(250 * 2 ** attempts, MAX_RETRY_MS);
      log.warn({ err, filename: name, object: entry.object, attempts, retryInMs: delay }, 'cannot load a published version; keeping the held one');
      if (!closed) {
        const t = setTimeout(() => {
          timers.delete(t);
          void consider(entry, seq); // load() never rejects: failures are retried here
        }, delay);
        t.unref();
        timers.add(t);
      }
    } finally {
      if (loading.get(name)?.entry === entry) loading.delete(name);
    }
  };

  /**
   * A version announced (on the channel or in the change log): its carried bytes held, else loaded
   * from the store. A change log entry names the file and the version; the rest of a catalog
   * entry follows from them, as the publish step made it (the filename's feed, the object's key).
   */
  const heard = (named: CatalogEntry | ChangeEntry, seq: number): void => {
    let entry: CatalogEntry;
    if ('object' in named) entry = named;
    else {
      const feed = registry.feeds.get(named.filename);
      if (feed === undefined) return;
      entry = { ...named, bookmaker: feed.bookmaker, kind: feed.kind, sport: feed.sport, object: objectKey(named.filename, named.sha256) };
    }
    const bytes = carried.take(entry);
    if (bytes) offer(entry, seq, bytes);
    else void consider(entry, seq);
  };

  /** Hold a version whose bytes came with it (this process's publish step, or carried ahead of a worker's commit). */
  const offer = (entry: CatalogEntry, seq: number, bytes: Buffer): void => {
    if (closed || !registry.feeds.has(entry.filename)) return;
    known.add(entry.filename);
    const inFlight = loading.get(entry.filename);
    // A newer version is on its way from the store: let it win.
    if (inFlight && inFlight.entry.sha256 !== entry.sha256 && supersedes(inFlight.entry, inFlight.seq, { entry, seq })) return;
    install(trustedVersion(entry, seq, bytes));
  };

  const applySnapshot = async (snapshot: CatalogSnapshot) => {
    const started = snapshot.entries.map((e) => consider(e, snapshot.seq)).filter((p) => p !== undefined);
    await Promise.allSettled(started);
  };

  return {
    get loaded() {
      return loaded;
    },
    get generation() {
      return generation;
    },
    get: (filename) => versions.get(filename),
    isPending: (filename) => known.has(filename) && !versions.has(filename),
    serves: (filename) => registry.feeds.has(filename),
    onInstall(listener) {
      installListeners.add(listener);
      return () => installListeners.delete(listener);
    },
    filenames: () => sorted,
    async refresh() {
      let snapshot: CatalogSnapshot;
      let source: 'redis' | 'manifest';
      try {
        snapshot = await withTimeout(catalog.snapshot(), deps.redisTimeoutMs ?? 3000, 'catalog snapshot');
        source = 'redis';
      } catch (err) {
        const manifest = await readManifest(store);
        if (!loaded) log.warn({ err: (err as Error).message, manifestSeq: manifest?.seq }, 'Redis catalog unavailable; loading the store manifest');
        snapshot = manifest ? manifestSnapshot(manifest) : { seq: 0, entries: [] };
        source = 'manifest';
      }
      await applySnapshot(snapshot);
      loaded = true;
      return source;
    },
    handleMessage(message) {
      const change = parseCatalogChange(message);
      if (!change) {
        log.warn('ignoring a malformed catalog announcement');
        return;
      }
      heard(change.entry, change.seq);
    },
    heard: (entry, seq) => heard(entry, seq),
    carried(message) {
      if (!closed) carried.put(message);
    },
    expect(sha256, bytes) {
      if (!closed) carried.hold(sha256, bytes);
    },
    offer,
    variant,
    async idle() {
      while (busy.size > 0) await Promise.allSettled([...busy]);
    },
    close() {
      closed = true;
      carried.clear();
      for (const t of timers) clearTimeout(t);
      timers.clear();
    },
  };
}
