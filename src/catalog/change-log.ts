/**
 * The change log as readers see it: the Redis stream the catalog's commit appends every published
 * change to, under the id `<seq>-0` (seq: the catalog's counter, one per published change), with
 * the sha256 it replaced. Positions are those seqs: a client's cursor is the last seq it has seen.
 */
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/key-names.js';
import type { CatalogEntry } from './types.js';

/** What the log keeps of a published entry: what a consumer is told, and what orders versions. */
export type ChangeEntry = Pick<CatalogEntry, 'filename' | 'sha256' | 'size' | 'generatedAt' | 'generatedAtMs' | 'publishedAt'>;

export function changeEntryOf(e: CatalogEntry): ChangeEntry {
  return { filename: e.filename, sha256: e.sha256, size: e.size, generatedAt: e.generatedAt, generatedAtMs: e.generatedAtMs, publishedAt: e.publishedAt };
}

export interface LoggedChange {
  /** The catalog's seq of this change: its position in the log. */
  readonly seq: number;
  readonly entry: ChangeEntry;
  /** The sha256 this version replaced under its filename; null for a first publication. */
  readonly previousSha256: string | null;
}

export interface LogBounds {
  /** The oldest position still kept; undefined when the log is empty. */
  readonly first: number | undefined;
  /** The newest position: the catalog's seq (0 before the first publication). */
  readonly last: number;
}

export interface ChangeLog {
  /** Changes after position `after`, oldest first, at most `count`. */
  range(after: number, count: number): Promise<LoggedChange[]>;
  bounds(): Promise<LogBounds>;
  /**
   * Changes after `after`, waiting up to `blockMs` for the first (XREAD BLOCK). Blocks its
   * connection: give it one of its own.
   */
  read(after: number, count: number, blockMs: number): Promise<LoggedChange[]>;
}

type RawEntry = [id: string, fields: string[]];

export function createChangeLog(redis: Redis, keys: RedisKeys): ChangeLog {
  return {
    async range(after, count) {
      const raw = (await redis.xrange(keys.changeLog, `(${after}-0`, '+', 'COUNT', count)) as RawEntry[];
      return parseEntries(raw);
    },
    async bounds() {
      const [oldest, seq] = await Promise.all([redis.xrange(keys.changeLog, '-', '+', 'COUNT', 1) as Promise<RawEntry[]>, redis.get(keys.catalogSeq)]);
      const first = oldest.length > 0 ? positionOf(oldest[0]![0]) : undefined;
      return { first, last: Number(seq ?? 0) };
    },
    async read(after, count, blockMs) {
      const reply = (await redis.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', keys.changeLog, `${after}-0`)) as [string, RawEntry[]][] | null;
      return reply === null ? [] : parseEntries(reply[0]![1]);
    },
  };
}

function positionOf(id: string): number {
  return Number(id.slice(0, id.indexOf('-')));
}

function parseEntries(raw: readonly RawEntry[]): LoggedChange[] {
  const out: LoggedChange[] = [];
  for (const [id, fields] of raw) {
    let entry: ChangeEntry | undefined;
    let previous: string | null = null;
    for (let i = 0; i < fields.length; i += 2) {
      if (fields[i] === 'e') entry = JSON.parse(fields[i + 1]!) as ChangeEntry;
      else if (fields[i] === 'p') previous = fields[i + 1] || null;
    }
    if (entry !== undefined) out.push({ seq: positionOf(id), entry, previousSha256: previous });
  }
  return out;
}
