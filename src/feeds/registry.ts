/**
 * The bookmaker registry turned into the exact set of valid feed filenames (spec §4.3,
 * CONTRACT §3). Pure: the same registry always gives the same set.
 */
import type { Bookmaker, FeedKind } from '../config.js';

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
  const add = (info: FeedInfo) => feeds.set(info.filename, Object.freeze(info));
  for (const b of bookmakers) {
    if (b.feeds === 'livepre') {
      add({ filename: `site_livepre_${b.key}.json`, bookmaker: b.key, kind: 'livepre', sport: null });
      continue;
    }
    if (b.feeds === 'combined-live') {
      add({ filename: `site_live_${b.key}.json`, bookmaker: b.key, kind: 'live', sport: null });
    }
    for (const sport of sports) {
      add({ filename: `site_live_${b.key}_${sport}.json`, bookmaker: b.key, kind: 'live', sport });
      add({ filename: `site_pregame_${b.key}_${sport}.json`, bookmaker: b.key, kind: 'pregame', sport });
    }
  }
  return Object.freeze({
    filenames: Object.freeze([...feeds.keys()].sort()),
    feeds,
    bookmakers: new Map(bookmakers.map((b) => [b.key, b])),
  });
}

/** The feed a filename names, or undefined when it is not a valid filename (case matters). */
export function parseFilename(registry: FeedRegistry, name: string): FeedInfo | undefined {
  return registry.feeds.get(name);
}
