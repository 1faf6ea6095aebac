/**
 * The newest-wins rule as the publish step decides a drop against the published entry, and as the
 * manifest writer asks whether an entry holds a version (or a newer one).
 */
import { describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../../src/catalog/types.js';
import { decideAgainst, holdsVersion } from '../../src/ingest/publish/decide.js';

const entry = (sha: string, generatedAtMs: number, publishedAt: string, sourceSha256?: string): CatalogEntry => ({
  filename: 'site_live_a.json',
  bookmaker: 'a',
  kind: 'live',
  sport: null,
  object: `objects/site_live_a.json/${sha}.json`,
  sha256: sha,
  size: 10,
  generatedAt: new Date(generatedAtMs).toISOString(),
  generatedAtMs,
  publishedAt,
  ...(sourceSha256 ? { sourceSha256 } : {}),
});

const T = '2026-11-29T04:00:00.000Z';
const LATER = '2026-11-29T04:00:00.500Z';

describe('decideAgainst', () => {
  it('is unchanged for the same bytes or the same bytes as received, superseded by a newer generated_at', () => {
    expect(decideAgainst(undefined, entry('a', 1, T))).toBeUndefined();
    expect(decideAgainst(entry('a', 1, T), entry('a', 1, LATER))).toBe('unchanged');
    expect(decideAgainst(entry('a', 1, T, 's'), { sha256: 'b', sourceSha256: 's', generatedAtMs: 2 })).toBe('unchanged');
    expect(decideAgainst(entry('a', 2, T), entry('b', 1, T))).toBe('superseded');
    expect(decideAgainst(entry('a', 1, T), entry('b', 1, T))).toBeUndefined(); // a correction publishes
    expect(decideAgainst(entry('a', 1, T), entry('b', 2, T))).toBeUndefined();
  });
});

describe('holdsVersion', () => {
  it('holds the version itself, an older one, or a correction published after it', () => {
    expect(holdsVersion(undefined, entry('a', 1, T))).toBe(false);
    expect(holdsVersion(entry('a', 1, T), entry('a', 1, T))).toBe(true);
    expect(holdsVersion(entry('b', 2, T), entry('a', 1, LATER))).toBe(true);
    expect(holdsVersion(entry('a', 1, T), entry('b', 2, T))).toBe(false);
    expect(holdsVersion(entry('b', 1, LATER), entry('a', 1, T))).toBe(true);
    expect(holdsVersion(entry('a', 1, T), entry('b', 1, LATER))).toBe(false);
    // Two corrections published in the same millisecond cannot be ordered: the one held stands.
    expect(holdsVersion(entry('a', 1, T), entry('b', 1, T))).toBe(true);
  });
});
