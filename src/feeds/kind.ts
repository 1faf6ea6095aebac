/**
 * A feed's kind and its filename's prefix, one to one: `site_live_…` is live, `site_pregame_…`
 * pregame, `site_livepre_…` livepre. The registry names its files with feedFilename and everything
 * else asks feedKindOf, so no other code matches on filenames to tell the kind.
 */
import type { FeedKind } from '../config.js';

const PREFIX: Readonly<Record<FeedKind, string>> = { live: 'site_live_', pregame: 'site_pregame_', livepre: 'site_livepre_' };

/** Every kind: live, pregame, livepre. */
export const FEED_KINDS = Object.freeze(Object.keys(PREFIX) as FeedKind[]);

/** The filename of a bookmaker's feed of `kind`: per sport, or combined (`sport` null). */
export function feedFilename(kind: FeedKind, bookmaker: string, sport: string | null): string {
  return `${PREFIX[kind]}${bookmaker}${sport === null ? '' : `_${sport}`}.json`;
}

/**
 * The kind a filename's prefix names, or undefined when it names none. It does not say the filename
 * is valid (only the registry does: parseFilename); for one that is, it is the feed's kind.
 */
export function feedKindOf(filename: string): FeedKind | undefined {
  return FEED_KINDS.find((kind) => filename.startsWith(PREFIX[kind]));
}
