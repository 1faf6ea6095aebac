/**
 * What the mirror remembers in DIR/.oddsfiles-mirror.json: the service, the position its files are
 * current at, and each file's version. Written atomically after files are in place (coalesced:
 * never waited for by the next change), so after a crash (even kill -9) the position never runs
 * ahead of the files: the stream resumes from it and replays at most what is already held, which
 * is recognised by its bytes (the ETag is their SHA-256) and not fetched again.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { etagOf, sha256Hex } from '../digest.js';
import { makeVersion, type FileVersion } from '../version.js';
import { readHeld, writeAtomic } from './dir.js';

export const STATE_FILE = '.oddsfiles-mirror.json';

export interface MirrorState {
  readonly version: 1;
  /** The service's base URL: a state made against another is not resumed. */
  readonly url: string;
  readonly position: number | undefined;
  readonly files: Record<string, { readonly etag: string; readonly generated_at: string; readonly published_at: string }>;
}

export async function readState(dir: string): Promise<MirrorState | undefined> {
  try {
    const s = JSON.parse(await readFile(join(dir, STATE_FILE), 'utf8')) as MirrorState;
    if (s.version !== 1 || typeof s.files !== 'object' || s.files === null) return undefined;
    return s;
  } catch {
    return undefined;
  }
}

export function stateOf(url: string, position: number | undefined, files: ReadonlyMap<string, FileVersion>): MirrorState {
  // No prototype: a file named `__proto__` is a member like any other.
  const out = Object.create(null) as Record<string, MirrorState['files'][string]>;
  for (const [name, v] of [...files].sort(([a], [b]) => (a < b ? -1 : 1)))
    out[name] = { etag: v.etag, generated_at: v.generatedAt, published_at: v.publishedAt };
  return { version: 1, url, position, files: out };
}

export async function writeState(dir: string, state: MirrorState): Promise<void> {
  // Not fsynced: a state lost with the machine is an older one (or none: everything is listed again).
  await writeAtomic(dir, STATE_FILE, new TextEncoder().encode(`${JSON.stringify(state, null, 1)}\n`), false);
}

/**
 * The versions DIR holds, as the state names them. A file whose bytes are not the version the
 * state names (replaced after the state was written, edited by hand, missing) is not held: the
 * stream's replay or the catalog brings it again.
 */
export async function heldVersions(dir: string, state: MirrorState): Promise<FileVersion[]> {
  const out: FileVersion[] = [];
  for (const [name, meta] of Object.entries(state.files)) {
    const bytes = await readHeld(dir, name);
    if (bytes && etagOf(await sha256Hex(bytes)) === meta.etag) out.push(makeVersion(name, meta.etag, meta.generated_at, meta.published_at, bytes));
  }
  return out;
}
