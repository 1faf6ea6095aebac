/**
 * The one-version-behind prebuild of the deltas: a file whose patch from its previous version was
 * asked for within `forMs` has that patch (of the IMs asked) built in the worker pool as soon as the
 * reader holds each new version, so a client one version behind (a mirror asking right after the
 * change event) finds it built, or joins its build, instead of starting one. Only such files hold
 * their previous version in memory (the base of that patch); files nobody diffs cost nothing: no
 * build, one version held as without deltas. At most `maxAtOnce` prebuilds run at once: past that a
 * version is not prebuilt, and its requests build its patch as any other.
 */
import type { PublishedCache } from '../data/cache.js';
import type { Version } from '../data/version.js';
import type { DeltaFacts } from './facts.js';
import { IMS, type Im } from './patches.js';

export interface PrebuildStats {
  /** Builds started when a version arrived. */
  readonly started: number;
  /** Versions of files with recent one-behind requests not prebuilt: too many prebuilds at once, or the pool refused. */
  readonly skipped: number;
  /** Requests one version behind that found their patch prebuilt or being prebuilt. */
  readonly joined: number;
}

export interface Prebuild {
  /** A request asked for `ims` of `filename` from the version before the current one. */
  askedOneBehind(filename: string, ims: Iterable<Im>): void;
  /**
   * The previous version of the file when `version` is its current one and `base` (hex digits of
   * a sha256) names that previous version: the base held in memory, whose patch was prebuilt.
   */
  heldBase(version: Version, base: string, ims: readonly Im[]): Version | undefined;
  stats(): PrebuildStats;
}

export interface PrebuildDeps {
  readonly published: Pick<PublishedCache, 'onInstall'>;
  readonly facts: Pick<DeltaFacts, 'pair'>;
  /** How long after the last one-behind request a file is prebuilt; 0: never. */
  readonly forMs: number;
  readonly maxAtOnce: number;
  /** Files larger than this are never diffed. */
  readonly maxBytes: number;
  readonly now?: () => number;
}

export function createPrebuild(deps: PrebuildDeps): Prebuild {
  const { facts, forMs, maxAtOnce, maxBytes } = deps;
  const now = deps.now ?? Date.now;
  /** Per filename, when each IM was last asked one version behind. */
  const asked = new Map<string, Partial<Record<Im, number>>>();
  const current = new Map<string, Version>();
  /** Per filename, the version before the current one, while its file is prebuilt. */
  const previous = new Map<string, Version>();
  /** The IMs each version was prebuilt for. */
  const prebuilt = new WeakMap<Version, readonly Im[]>();
  let running = 0;
  let started = 0;
  let skipped = 0;
  let joined = 0;

  if (forMs > 0)
    deps.published.onInstall((v) => {
      const name = v.entry.filename;
      const prev = current.get(name);
      current.set(name, v);
      const times = asked.get(name);
      if (times === undefined) return;
      const t = now();
      const ims = IMS.filter((im) => t - (times[im] ?? -Infinity) < forMs);
      if (ims.length === 0) asked.delete(name);
      if (ims.length === 0 || prev === undefined || prev.identity.body.length > maxBytes || v.identity.body.length > maxBytes) {
        previous.delete(name);
        return;
      }
      previous.set(name, prev);
      const p = running < maxAtOnce ? facts.pair(v, prev.entry.sha256, ims, prev) : undefined;
      if (p === undefined) {
        skipped++;
        return;
      }
      prebuilt.set(v, ims);
      if (!(p instanceof Promise)) return;
      started++;
      running++;
      void p.finally(() => running--);
    });

  return {
    askedOneBehind(filename, ims) {
      if (forMs <= 0) return;
      const times = asked.get(filename) ?? {};
      for (const im of ims) times[im] = now();
      asked.set(filename, times);
    },
    heldBase(version, base, ims) {
      const name = version.entry.filename;
      const prev = previous.get(name);
      if (prev === undefined || !prev.entry.sha256.startsWith(base) || current.get(name) !== version) return undefined;
      const done = prebuilt.get(version);
      if (done !== undefined && ims.every((im) => done.includes(im))) joined++;
      return prev;
    },
    stats: () => ({ started, skipped, joined }),
  };
}
