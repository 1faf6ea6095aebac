/**
 * Whether a catalog snapshot lacks a version the store's manifest holds. The catalog only moves
 * forward (newest wins, nothing is removed), and every manifest is written from a snapshot of it,
 * so a snapshot read after the manifest was written holds each of its versions or a newer one;
 * one that does not means Redis lost commits the manifest had covered.
 */
import type { Manifest } from '../../catalog/manifest.js';
import type { CatalogEntry } from '../../catalog/types.js';
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
