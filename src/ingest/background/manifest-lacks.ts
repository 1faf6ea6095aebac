/**
 * The check before a manifest write that the catalog holds every version the store's manifest
 * holds. The catalog only moves forward (newest wins, nothing is removed), and every manifest is
 * written from a snapshot of it, so a snapshot read after the manifest was written holds each of
 * its versions or a newer one; one that does not means Redis lost commits the manifest had
 * covered (possibly made by another worker, which this one never saw), and writing it would lose
 * them from the store too.
 */
import { readManifest, type Manifest } from '../../catalog/manifest.js';
import type { CatalogEntry } from '../../catalog/types.js';
import { StoreNotFoundError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { MANIFEST_KEY, type Store } from '../../store/store.js';
import { holdsVersion } from '../publish/decide.js';
import type { CatalogMirror } from './catalog-mirror.js';

type Snapshot = Awaited<ReturnType<CatalogMirror['read']>>;

export interface ManifestGuard {
  /**
   * The catalog to write; undefined when it lacks versions the store's manifest holds (the
   * catalog must be restored from the manifest first). The store's manifest is read before every
   * write (another worker may have written it, with commits this one never saw), and compared
   * only when it is not this writer's own last one.
   */
  snapshot(): Promise<Snapshot | undefined>;
  /** This writer wrote `bytes` as the manifest. */
  wrote(bytes: Buffer): void;
}

export function createManifestGuard(deps: { mirror: CatalogMirror; store: Pick<Store, 'get'>; log: Logger }): ManifestGuard {
  const { mirror, store, log } = deps;
  let ownHeader: string | undefined;
  return {
    async snapshot() {
      const at = await mirror.read();
      const stored = await othersManifest(store, ownHeader, log);
      if (!stored) return at;
      if (firstLacking(stored, at.get) === undefined) return at;
      // Maybe only an older snapshot than the manifest another process just wrote: read again.
      mirror.forget();
      const again = await mirror.read();
      const lacking = firstLacking(stored, again.get);
      if (lacking === undefined) return again;
      log.warn(
        { filename: lacking, manifestSeq: stored.seq, seq: again.seq },
        "the catalog lacks versions the store's manifest holds (Redis lost commits): restoring it from the manifest before writing one",
      );
      mirror.reset();
      return undefined;
    },
    wrote(bytes) {
      ownHeader = manifestHeader(bytes);
    },
  };
}

/** The first filename whose version in `stored` the snapshot (`get`: its entry JSON) lacks. */
export function firstLacking(stored: Manifest, get: (filename: string) => string | undefined): string | undefined {
  for (const [filename, version] of Object.entries(stored.files)) {
    const json = get(filename);
    if (json === undefined) return filename;
    // The same version, without parsing: its entry names the same object.
    if (json.includes(`"sha256":"${version.sha256}"`)) continue;
    if (!holdsVersion(JSON.parse(json) as CatalogEntry, version)) return filename;
  }
  return undefined;
}

/** What names a manifest's write: its first bytes, `{"format":1,"seq":…,"written_at":"…"` (renderManifest). */
function manifestHeader(bytes: Buffer): string {
  return /^\{"format":1,"seq":\d+,"written_at":"[^"]*"/.exec(bytes.subarray(0, 96).toString('latin1'))?.[0] ?? '';
}

/** The store's manifest, unless it is the one this writer wrote last (`ownHeader`); undefined also when there is none. */
async function othersManifest(store: Pick<Store, 'get'>, ownHeader: string | undefined, log: Logger): Promise<Manifest | undefined> {
  let bytes: Buffer;
  try {
    bytes = await store.get(MANIFEST_KEY);
  } catch (err) {
    if (err instanceof StoreNotFoundError) return undefined;
    throw err;
  }
  if (ownHeader !== undefined && manifestHeader(bytes) === ownHeader) return undefined;
  return writersManifest(() => Promise.resolve(bytes), log);
}

/**
 * The store's manifest as its writer reads it: one that is not JSON (damaged, edited by hand) is
 * logged and taken as none, so that the next write replaces it instead of every write failing.
 */
export async function writersManifest(get: Store['get'], log: Logger): Promise<Manifest | undefined> {
  try {
    return await readManifest({ get });
  } catch (err) {
    if (!(err instanceof SyntaxError)) throw err;
    log.warn({ err: { message: err.message } }, "the store's manifest.json is not JSON: it is written again from the catalog");
    return undefined;
  }
}
