/**
 * The documents the benches drop: made by the test corpus's generator (test/fixtures/corpus.ts),
 * then stamped with a new generated_at for each version, in place, so a version costs a copy and a
 * hash rather than a new document.
 */
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { generateDocument, type FixtureFeed } from '../../../test/fixtures/corpus.js';
import { sha256 } from '../../../test/helpers/published.js';

/** The generated_at written by the generator; replaced in place (same length) for each version. */
const TEMPLATE_GENERATED_AT = '2000-01-01T00:00:00.000Z';

export interface DocTemplate {
  readonly feed: FixtureFeed;
  readonly bytes: Buffer;
  /** Offset of the template generated_at in bytes. */
  readonly at: number;
}

export interface DocVersion {
  readonly bytes: Buffer;
  readonly generatedAt: string;
  /** The ETag the reader gives this version's identity bytes. */
  readonly etag: string;
  readonly sha256: string;
}

export function docTemplate(feed: FixtureFeed, targetBytes: number): DocTemplate {
  const bytes = generateDocument(feed, { targetBytes, generatedAt: TEMPLATE_GENERATED_AT });
  const at = bytes.indexOf(`"${TEMPLATE_GENERATED_AT}"`);
  if (at < 0) throw new Error(`no generated_at in the document for ${feed.filename}`);
  return { feed, bytes, at: at + 1 };
}

// An hour in the past, so no version is refused as from the future; 1 ms apart, always newer.
let clock = Date.now() - 3_600_000;

/** A new version of the template: a later generated_at than any before in this process. */
export function version(t: DocTemplate): DocVersion {
  clock = Math.max(clock + 1, Date.now() - 3_600_000);
  const generatedAt = new Date(clock).toISOString();
  const bytes = Buffer.from(t.bytes);
  bytes.write(generatedAt, t.at, 'latin1');
  const sha = sha256(bytes);
  return { bytes, generatedAt, sha256: sha, etag: `"${sha.slice(0, 32)}"` };
}

/** A new version of every template, named by its feed. */
export function versions(templates: readonly DocTemplate[]): (DocVersion & { name: string })[] {
  return templates.map((t) => ({ name: t.feed.filename, ...version(t) }));
}

/** Sports of a generated registry. */
export const MANY_SPORTS = ['soccer', 'basketball', 'tennis', 'hockey', 'baseball', 'rugby', 'cricket', 'handball', 'volleyball', 'darts'];

/** A registry (config and feeds) of `split` bookmakers bk0001… × the given sports. */
export function generatedRegistry(bookmakers: number, sports: readonly string[]): { config: Record<string, unknown>; feeds: FixtureFeed[] } {
  const bks = Array.from({ length: bookmakers }, (_, i) => {
    const n = String(i + 1).padStart(4, '0');
    return { key: `bk${n}`, name: `Bk${n}`, feeds: 'split' };
  });
  const feeds: FixtureFeed[] = [];
  for (const b of bks) {
    for (const sport of sports) {
      feeds.push({ filename: `site_live_${b.key}_${sport}.json`, bookmaker: b.key, kind: 'live', sport });
      feeds.push({ filename: `site_pregame_${b.key}_${sport}.json`, bookmaker: b.key, kind: 'pregame', sport });
    }
  }
  return { config: { bookmakers: bks, sports: [...sports] }, feeds };
}

/**
 * Write files under dot-names in `dir` (the watcher ignores them), to be renamed into place later:
 * the renames of a round then happen back to back, the writes before the clock starts.
 */
export async function stage(dir: string, items: readonly { name: string; bytes: Buffer }[]): Promise<{ tmp: string; final: string }[]> {
  const out: { tmp: string; final: string }[] = [];
  for (const it of items) {
    const tmp = join(dir, `.${it.name}.${randomBytes(3).toString('hex')}.tmp`);
    await writeFile(tmp, it.bytes);
    out.push({ tmp, final: join(dir, it.name) });
  }
  return out;
}
