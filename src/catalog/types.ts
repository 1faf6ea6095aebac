import type { FeedKind } from '../config.js';

/** What is published under one filename. */
export interface CatalogEntry {
  readonly filename: string;
  readonly bookmaker: string;
  readonly kind: FeedKind;
  readonly sport: string | null;
  /** Store key of the version object. */
  readonly object: string;
  readonly sha256: string;
  /**
   * SHA-256 of the document as it was received, when `generated_at` was stamped into it (the
   * published bytes then differ): the same document sent again is this version (unchanged).
   */
  readonly sourceSha256?: string;
  readonly size: number;
  /** The document's `generated_at` as published (stamped when the drop had none). */
  readonly generatedAt: string;
  readonly generatedAtMs: number;
  /** When this version was published (ISO 8601 UTC). */
  readonly publishedAt: string;
}

/** A whole catalog at one moment. `seq` grows by one on every published change. */
export interface CatalogSnapshot {
  readonly seq: number;
  readonly entries: readonly CatalogEntry[];
}

export type CommitOutcome = 'published' | 'superseded' | 'unchanged';

/** How a drop was settled: its commit's outcome, or rejected. */
export type DropOutcome = CommitOutcome | 'rejected';

export interface CommitResult {
  readonly outcome: CommitOutcome;
  /** The entry published under the filename after the commit. */
  readonly current: CatalogEntry;
  readonly seq: number;
  /**
   * Version hashes no longer used by the versions list, the retained history nor the current
   * entry: their objects may be deleted.
   */
  readonly evicted: readonly string[];
  /** When published: the history member added and those trimmed (history-index.ts), for the store's records. */
  readonly history?: { readonly added: string; readonly removed: readonly string[] };
  /**
   * The catalog's seq was below one this process had been given before: Redis lost commits (it
   * came back on older data, or a replica without them was promoted).
   */
  readonly behind?: true;
}

/** Announced on the catalog channel after every published change. */
export interface CatalogChange {
  readonly seq: number;
  readonly entry: CatalogEntry;
}
