/**
 * Whether a catalog snapshot lacks a version the store's manifest holds. The catalog only moves
 * forward (newest wins, nothing is removed), and every manifest is written from a snapshot of it,
 * so a snapshot read after the manifest was written holds each of its versions or a newer one;
 * one that does not means Redis lost commits the manifest had covered.
 */
import { readManifest, type Manifest } from '../../catalog/manifest.js';
import type { CatalogEntry } from '../../catalog/types.js';
import { StoreNotFoundError } from '../../errors.js';
import { MANIFEST_KEY, type Store } from '../../store/store.js';
import { holdsVersion } from '../publish/decide.js';

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
export function manifestHeader(bytes: Buffer): string {
  return /^\{"format":1,"seq":\d+,"written_at":"[^"]*"/.exec(bytes.subarray(0, 96).toString('latin1'))?.[0] ?? '';
}

/**
 * The store's manifest, unless it is the one this writer wrote last (`ownHeader`: its header),
 * which holds nothing the writer's catalog lacks; undefined also when there is none.
 */
export async function othersManifest(store: Pick<Store, 'get'>, ownHeader: string | undefined): Promise<Manifest | undefined> {
  let bytes: Buffer;
  try {
    bytes = await store.get(MANIFEST_KEY);
  } catch (err) {
    if (err instanceof StoreNotFoundError) return undefined;
    throw err;
  }
  if (ownHeader !== undefined && manifestHeader(bytes) === ownHeader) return undefined;
  return readManifest({ get: () => Promise.resolve(bytes) });
}
