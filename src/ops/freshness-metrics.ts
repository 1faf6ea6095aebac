/**
 * Feed freshness, computed at scrape time from the caller's in-memory catalog: the age of each
 * feed (since generated_at and since published), the stale_after thresholds, and how many feeds
 * of each kind are published and stale.
 */
import { Gauge, type Registry } from 'prom-client';
import type { CatalogEntry } from '../catalog/types.js';
import type { FeedKind } from '../config.js';
import { FEED_KINDS } from '../feeds/kind.js';

export interface BindCatalogOptions {
  /** config.staleAfterMs: exported as oddsfiles_feed_stale_after_seconds{kind} and used for oddsfiles_feeds_stale. */
  readonly staleAfterMs?: Readonly<Record<FeedKind, number>>;
}

export interface FreshnessMetrics {
  /** Report the feeds `getEntries` lists at every scrape. */
  bind(getEntries: () => Iterable<CatalogEntry>, options?: BindCatalogOptions): void;
}

/** `now`: the clock ages are measured against. */
export function createFreshnessMetrics(registry: Registry, now: () => number): FreshnessMetrics {
  const registers = [registry];
  let catalogSource: (() => Iterable<CatalogEntry>) | undefined;
  let staleAfterMs: Readonly<Record<FeedKind, number>> | undefined;
  const entries = (): CatalogEntry[] => (catalogSource ? [...catalogSource()] : []);

  new Gauge({
    name: 'oddsfiles_feed_age_seconds',
    help: "Seconds since the published version's generated_at, per feed.",
    labelNames: ['filename', 'bookmaker', 'kind'] as const,
    registers,
    collect() {
      this.reset();
      const t = now();
      for (const e of entries()) this.set({ filename: e.filename, bookmaker: e.bookmaker, kind: e.kind }, (t - e.generatedAtMs) / 1000);
    },
  });
  new Gauge({
    name: 'oddsfiles_feed_published_age_seconds',
    help: 'Seconds since the current version was published, per feed.',
    labelNames: ['filename', 'bookmaker', 'kind'] as const,
    registers,
    collect() {
      this.reset();
      const t = now();
      for (const e of entries()) {
        const published = Date.parse(e.publishedAt);
        if (Number.isFinite(published)) this.set({ filename: e.filename, bookmaker: e.bookmaker, kind: e.kind }, (t - published) / 1000);
      }
    },
  });
  new Gauge({
    name: 'oddsfiles_feed_stale_after_seconds',
    help: 'The stale_after threshold per feed kind (config): a feed older than this is stale.',
    labelNames: ['kind'] as const,
    registers,
    collect() {
      this.reset();
      if (!staleAfterMs) return;
      for (const k of FEED_KINDS) this.set({ kind: k }, staleAfterMs[k] / 1000);
    },
  });
  new Gauge({
    name: 'oddsfiles_feeds_published',
    help: 'Feeds published, by kind (from the in-memory catalog).',
    labelNames: ['kind'] as const,
    registers,
    collect() {
      this.reset();
      if (!catalogSource) return;
      const n: Record<string, number> = { live: 0, pregame: 0, livepre: 0 };
      for (const e of entries()) n[e.kind] = (n[e.kind] ?? 0) + 1;
      for (const [kind, v] of Object.entries(n)) this.set({ kind }, v);
    },
  });
  new Gauge({
    name: 'oddsfiles_feeds_stale',
    help: 'Feeds whose generated_at is older than stale_after for their kind, by kind.',
    labelNames: ['kind'] as const,
    registers,
    collect() {
      this.reset();
      if (!catalogSource || !staleAfterMs) return;
      const t = now();
      const n: Record<string, number> = { live: 0, pregame: 0, livepre: 0 };
      for (const e of entries()) if (t - e.generatedAtMs > staleAfterMs[e.kind]) n[e.kind] = (n[e.kind] ?? 0) + 1;
      for (const [kind, v] of Object.entries(n)) this.set({ kind }, v);
    },
  });

  return {
    bind(getEntries, options = {}) {
      catalogSource = getEntries;
      staleAfterMs = options.staleAfterMs;
    },
  };
}
