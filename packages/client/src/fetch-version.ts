/**
 * Getting the current version of one file: as a JSON Patch from the version held when the service
 * offers one (`A-IM: json-patch` with the held ETag), else whole. Nothing is kept that is not
 * exactly a published version: every version's bytes must have the SHA-256 its ETag names. A
 * patched document is written in the held file's layout and kept when those bytes check out
 * (they then match the answer's Json-Canonical-Sha256 too); otherwise the whole file is fetched,
 * and when the patched document did match Json-Canonical-Sha256 (the patch was right, the layout
 * is not JSON.stringify's) no more patches are asked for that file.
 */
import { etagOf, identityEtag, sha256Hex } from './digest.js';
import { OddsfilesClientError } from './errors.js';
import { readBounded, type Http } from './http.js';
import { applyPatch, canonical, layoutOf, serialize, type PatchOp } from './json.js';
import { makeVersion, type FileVersion } from './version.js';

export type Fetched =
  | { readonly kind: 'version'; readonly version: FileVersion; readonly via: 'patch' | 'whole'; readonly wireBytes: number }
  /** The version held is current. */
  | { readonly kind: 'held' }
  /** No longer published, or no longer on the key's list (404, 403). */
  | { readonly kind: 'gone'; readonly status: number };

/** What the change or catalog said of the version, to fill in what the answer does not carry. */
export interface Announced {
  readonly etag: string;
  readonly generatedAt: string;
  readonly publishedAt: string;
}

const encoder = new TextEncoder();

/** How many files' patched documents are kept parsed. */
const KEEP_PARSED = 8;

/** The default bound of an answer's body (the service's own default limit per file is 50 MiB). */
export const MAX_FILE_BYTES = 256 * 1024 * 1024;

const decoder = new TextDecoder();

export function createVersionFetcher(http: Http, maxFileBytes = MAX_FILE_BYTES) {
  /** Files whose patched versions did not come out byte-identical: fetched whole from now on. */
  const noPatch = new Set<string>();
  /**
   * The document of the version last patched, per file (the few most recent): the next patch of
   * that file applies to it in place rather than to its bytes parsed again. Taken out while used,
   * so a patch that fails leaves nothing behind.
   */
  const parsed = new Map<string, { readonly etag: string; readonly doc: unknown }>();
  const docOf = (held: FileVersion): unknown => {
    const kept = parsed.get(held.filename);
    parsed.delete(held.filename);
    return kept?.etag === held.etag ? kept.doc : held.json();
  };
  const keepDoc = (filename: string, etag: string, doc: unknown) => {
    parsed.set(filename, { etag, doc });
    if (parsed.size > KEEP_PARSED) parsed.delete(parsed.keys().next().value!);
  };

  /**
   * generated_at and the publication time of the version an answer carries. A version newer than
   * the one announced (published meanwhile) has only Last-Modified, to the second: the later of it
   * and the announced version's publication is the best bound (its lag is then an upper bound).
   */
  const metaOf = (res: Response, etag: string, announced: Announced | undefined) => {
    const same = announced?.etag === etag;
    const lastModified = Date.parse(res.headers.get('last-modified') ?? '');
    const bound = Math.max(Number.isNaN(lastModified) ? 0 : lastModified, announced ? Date.parse(announced.publishedAt) : 0);
    return {
      generatedAt: res.headers.get('generated-at') ?? (same ? announced.generatedAt : ''),
      publishedAt: same ? announced.publishedAt : new Date(bound || Date.now()).toISOString(),
    };
  };

  /** The patched version; `layout` when the patch was right but the held layout does not rebuild the bytes; undefined when the patch failed. */
  const patched = async (held: FileVersion, res: Response, announced: Announced | undefined): Promise<FileVersion | 'layout' | undefined> => {
    const etag = identityEtag(res.headers.get('etag'));
    const digest = res.headers.get('json-canonical-sha256');
    const layout = layoutOf(held.text());
    const body = decoder.decode(await readBounded(res, maxFileBytes, `GET ${held.filename}`));
    if (etag === undefined || layout === undefined) return undefined;
    try {
      // Copies may add at most the held file's size: a patch of the service never copies.
      const doc = applyPatch(docOf(held), JSON.parse(body) as PatchOp[], held.bytes.length);
      const text = serialize(doc, layout);
      const bytes = encoder.encode(text);
      if (etagOf(await sha256Hex(bytes)) === etag) {
        keepDoc(held.filename, etag, doc);
        const meta = metaOf(res, etag, announced);
        return makeVersion(held.filename, etag, meta.generatedAt, meta.publishedAt, bytes, text);
      }
      return digest !== null && (await sha256Hex(canonical(doc))) === digest ? 'layout' : undefined;
    } catch {
      return undefined;
    }
  };

  const wire = (res: Response, fallback: number) => {
    const n = Number(res.headers.get('content-length'));
    return Number.isFinite(n) && n > 0 ? n : fallback;
  };

  return {
    async fetch(filename: string, held: FileVersion | undefined, announced: Announced | undefined): Promise<Fetched> {
      const path = `v1/data/${encodeURIComponent(filename)}`;
      let askPatch = held !== undefined && !noPatch.has(filename) && layoutOf(held.text()) !== undefined;
      for (let tries = 0; tries < 3; tries++) {
        const headers: Record<string, string> = { 'accept-encoding': 'br, gzip' };
        if (held) headers['if-none-match'] = held.etag;
        if (askPatch) headers['a-im'] = 'json-patch';
        const res = await http.get(path, headers, `GET ${filename}`);
        if (res.status === 304) {
          await res.body?.cancel();
          return { kind: 'held' };
        }
        if (res.status === 403 || res.status === 404) {
          await res.body?.cancel();
          return { kind: 'gone', status: res.status };
        }
        if (res.status === 226 && held) {
          const version = await patched(held, res, announced);
          if (typeof version === 'object') return { kind: 'version', version, via: 'patch', wireBytes: wire(res, version.bytes.length) };
          if (version === 'layout') noPatch.add(filename);
          askPatch = false;
          continue;
        }
        if (res.status === 200) {
          const bytes = await readBounded(res, maxFileBytes, `GET ${filename}`);
          const etag = identityEtag(res.headers.get('etag'));
          // Torn or not the version its ETag names: ask again.
          if (etag === undefined || etagOf(await sha256Hex(bytes)) !== etag) continue;
          const meta = metaOf(res, etag, announced);
          return {
            kind: 'version',
            version: makeVersion(filename, etag, meta.generatedAt, meta.publishedAt, bytes),
            via: 'whole',
            wireBytes: wire(res, bytes.length),
          };
        }
        await res.body?.cancel();
        throw new OddsfilesClientError('protocol', `GET ${path} answered ${res.status}`, res.status);
      }
      throw new OddsfilesClientError('protocol', `GET ${path}: three answers in a row did not match their ETag`);
    },
  };
}
