/**
 * What a principal may list: the servable filenames its allow-list matches, sorted, as the JSON
 * body of `GET /v1/files`. Computed once per allow-list and published set, not per request.
 */
import type { Principal } from '../../keys/ring.js';
import type { PublishedCache } from './cache.js';
import { sha256Hex } from '../../sha256.js';

export interface FileList {
  readonly files: readonly string[];
  readonly body: Buffer;
  readonly etag: string;
}

export interface FileLists {
  forPrincipal(principal: Principal): FileList;
}

export function createFileLists(published: Pick<PublishedCache, 'generation' | 'filenames'>): FileLists {
  // Keyed by the allow-list array: principals are replaced when keys are reloaded, so entries of
  // old ones simply fall away; marketplace subscribers on one plan share their plan's array.
  const memo = new WeakMap<readonly string[], { generation: number; list: FileList }>();
  return {
    forPrincipal(principal) {
      const generation = published.generation;
      const hit = memo.get(principal.patterns);
      if (hit && hit.generation === generation) return hit.list;
      const files = published.filenames().filter((f) => principal.allows(f));
      const body = Buffer.from(JSON.stringify({ files }));
      const etag = `"l-${sha256Hex(body).slice(0, 32)}"`;
      const list = { files, body, etag };
      memo.set(principal.patterns, { generation, list });
      return list;
    },
  };
}
