/** GET /v1/files: the published filenames the key may download, sorted, as `{"files": [...]}`. */
import type { IncomingHttpHeaders } from 'node:http';
import type { FileList } from './allow.js';
import type { Answer } from './answer.js';
import { CACHE_CONTROL } from './data-route.js';
import { etagMatches } from './encoding.js';

export const FILES_PATH = '/v1/files';

/** The answer to a GET of `list` (304 when If-None-Match names its ETag). */
export function filesAnswer(list: FileList, headers: IncomingHttpHeaders): Answer {
  const inm = headers['if-none-match'];
  if (inm !== undefined && etagMatches(inm, list.etag)) return { status: 304, headers: ['etag', list.etag, 'cache-control', CACHE_CONTROL] };
  return { status: 200, headers: ['etag', list.etag, 'cache-control', CACHE_CONTROL, 'content-type', 'application/json'], body: list.body };
}
