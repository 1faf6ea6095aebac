/**
 * The bookmaker registry turned into the exact set of valid feed filenames. A `split` bookmaker
 * has `site_live_<key>_<sport>.json` and `site_pregame_<key>_<sport>.json` per sport; a
 * `combined-live` one those plus `site_live_<key>.json`; a `livepre` one `site_livepre_<key>.json`
 * only. Case matters. Pure: the same registry always gives the same set.
 */
import type { Bookmaker, FeedKind } from '../config.js';
import { feedFilename } from './kind.js';

export interface FeedInfo {
  readonly filename: string;
  /** Company key of the bookmaker (as in the filename). */
  readonly bookmaker: string;
  readonly kind: FeedKind;
  /** The sport of a per-sport file; null for combined files. */
  readonly sport: string | null;
}

export interface FeedRegistry {
  /** Every valid filename, sorted. */
  readonly filenames: readonly string[];
  readonly feeds: ReadonlyMap<string, FeedInfo>;
  readonly bookmakers: ReadonlyMap<string, Bookmaker>;
}

export function buildRegistry(bookmakers: readonly Bookmaker[], sports: readonly string[]): FeedRegistry {
  const feeds = new Map<string, FeedInfo>();
  const add = (bookmaker: string, kind: FeedKind, sport: string | null) => {
    const filename = feedFilename(kind, bookmaker, sport);
    feeds.set(filename, Object.freeze({ filename, bookmaker, kind, sport }));
  };
  for (const b of bookmakers) {
    if (b.feeds === 'livepre') {
      add(b.key, 'livepre', null);
      continue;
    }
    if (b.feeds === 'combined-live') add(b.key, 'live', null);
    for (const sport of sports) {
      add(b.key, 'live', sport);
      add(b.key, 'pregame', sport);
    }
  }
  return Object.freeze({
    filenames: Object.freeze([...feeds.keys()].sort()),
    feeds,
    bookmakers: new Map(bookmakers.map((b) => [b.key, b])),
  });
}

/**
 * The values a document's `bookmaker` may take in this bookmaker's files: its company key and its
 * public name in lowercase (one value when they are the same).
 */
export function acceptedBookmakerValues(bookmaker: Bookmaker): readonly string[] {
  const name = bookmaker.name.toLowerCase();
  return name === bookmaker.key ? [bookmaker.key] : [bookmaker.key, name];
}

/** The feed a filename names, or undefined when it is not a valid filename (case matters). */
export function parseFilename(registry: FeedRegistry, name: string): FeedInfo | undefined {
  return registry.feeds.get(name);
}
