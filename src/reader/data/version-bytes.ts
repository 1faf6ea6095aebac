/**
 * The bytes of any published version still in the store, read on demand: a reader holds only the
 * current version of each file in memory, and older ones (history, the base of a delta) come from
 * the store through a small cache, bounded in bytes. Concurrent reads of one version share one
 * store GET. A version the store no longer has is `undefined`.
 */
import { LRUCache } from 'lru-cache';
import { StoreNotFoundError } from '../../errors.js';
import { objectKey, type Store } from '../../store/store.js';

export interface VersionBytes {
  /** The bytes of `filename`'s version `sha256`, or undefined when the store no longer has it. */
  get(filename: string, sha256: string): Promise<Buffer | undefined>;
}

export interface VersionBytesDeps {
  readonly store: Pick<Store, 'get'>;
  /** Cache size in bytes (default 32 MiB; 0: none). */
  readonly maxBytes?: number;
}

/** What a missing version is cached as, so that asking again does not ask the store again. */
const GONE = Buffer.alloc(0);

export function createVersionBytes(deps: VersionBytesDeps): VersionBytes {
  const read = async (filename: string, sha256: string): Promise<Buffer> => {
    try {
      return await deps.store.get(objectKey(filename, sha256));
    } catch (err) {
      if (err instanceof StoreNotFoundError) return GONE;
      throw err;
    }
  };
  if (deps.maxBytes === 0)
    return {
      async get(filename, sha256) {
        const b = await read(filename, sha256);
        return b === GONE ? undefined : b;
      },
    };
  const cache = new LRUCache<string, Buffer, { filename: string; sha256: string }>({
    maxSize: deps.maxBytes ?? 32 * 1024 * 1024,
    // A gone version still takes a slot's worth, so that the cache cannot fill with them unbounded.
    sizeCalculation: (b) => Math.max(b.length, 64),
    fetchMethod: (_key, _stale, { context }) => read(context.filename, context.sha256),
  });
  return {
    async get(filename, sha256) {
      const b = await cache.fetch(`${filename}/${sha256}`, { context: { filename, sha256 } });
      return b === undefined || b === GONE ? undefined : b;
    },
  };
}
