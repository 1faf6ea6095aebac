/**
 * The catalog mirrored into the store as manifest.json, so that a reader holding only the store
 * can serve, and so that the store on its own is a complete, consistent copy of what is published.
 */
import { MANIFEST_KEY, type Store } from '../store/store.js';
import { StoreNotFoundError } from '../errors.js';
import type { Catalog } from './redis-catalog.js';
import type { CatalogEntry, CatalogSnapshot } from './types.js';

export interface Manifest {
  readonly format: 1;
  readonly seq: number;
  readonly written_at: string;
  readonly files: Readonly<Record<string, CatalogEntry>>;
}

export function toManifest(snapshot: CatalogSnapshot, now: Date): Manifest {
  const files: Record<string, CatalogEntry> = {};
  for (const e of snapshot.entries) files[e.filename] = e;
  return { format: 1, seq: snapshot.seq, written_at: now.toISOString(), files };
}

/**
 * The bytes of the manifest at `seq` from each entry's JSON (as the catalog stores it, as
 * JSON.stringify writes it), `files` sorted by filename: the same bytes as
 * JSON.stringify(toManifest(...)) of that snapshot, without parsing and re-serializing every entry.
 */
export function renderManifest(seq: number, now: Date, files: Iterable<readonly [string, string]>): Buffer {
  const parts: string[] = [];
  for (const [filename, json] of files) parts.push(`${JSON.stringify(filename)}:${json}`);
  return Buffer.from(`{"format":1,"seq":${JSON.stringify(seq)},"written_at":${JSON.stringify(now.toISOString())},"files":{${parts.join(',')}}}`);
}

/**
 * Write the manifest from the current catalog. Two workers may race (A snapshots seq 5, B writes
 * seq 6, A writes seq 5): after writing, each checks the catalog's seq and writes again until what
 * it wrote is current, so the last writer always leaves the newest manifest behind.
 */
export async function syncManifest(catalog: Catalog, store: Store, now: () => Date = () => new Date()): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const snapshot = await catalog.snapshot();
    await store.put(MANIFEST_KEY, Buffer.from(JSON.stringify(toManifest(snapshot, now()))), 'application/json');
    if ((await catalog.seq()) === snapshot.seq) return snapshot.seq;
  }
  return -1;
}

export async function readManifest(store: Pick<Store, 'get'>): Promise<Manifest | undefined> {
  try {
    const m = JSON.parse((await store.get(MANIFEST_KEY)).toString('utf8')) as Manifest;
    return m.format === 1 ? m : undefined;
  } catch (err) {
    if (err instanceof StoreNotFoundError) return undefined;
    throw err;
  }
}

export function manifestSnapshot(m: Manifest): CatalogSnapshot {
  return { seq: m.seq, entries: Object.values(m.files).sort((a, b) => (a.filename < b.filename ? -1 : 1)) };
}
