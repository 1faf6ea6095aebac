/**
 * One change as consumers see it, made once per change and shared by every stream and long-poll:
 * the JSON of /v1/changes and the bytes of the server-sent event of /v1/stream.
 */
import type { LoggedChange } from '../../catalog/change-log.js';
import { etagFor } from '../data/version.js';

export interface ChangeJson {
  readonly position: number;
  readonly filename: string;
  /** The ETag a GET of the file answers with (identity coding). */
  readonly etag: string;
  /** The ETag of the version it replaced; null for a first publication. */
  readonly previous_etag: string | null;
  readonly sha256: string;
  readonly size: number;
  readonly generated_at: string;
  readonly published_at: string;
}

export interface FeedEvent {
  readonly seq: number;
  readonly filename: string;
  readonly json: ChangeJson;
  /** `id: <position>`, `event: change`, `data: <json>`: the whole SSE frame. */
  readonly frame: Buffer;
}

export function toFeedEvent(c: LoggedChange): FeedEvent {
  const e = c.entry;
  const json: ChangeJson = {
    position: c.seq,
    filename: e.filename,
    etag: etagFor(e.sha256, 'identity'),
    previous_etag: c.previousSha256 === null ? null : etagFor(c.previousSha256, 'identity'),
    sha256: e.sha256,
    size: e.size,
    generated_at: e.generatedAt,
    published_at: e.publishedAt,
  };
  return { seq: c.seq, filename: e.filename, json, frame: Buffer.from(`id: ${c.seq}\nevent: change\ndata: ${JSON.stringify(json)}\n\n`) };
}
