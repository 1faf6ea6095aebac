/**
 * Compressed variants, made on demand: the first request that accepts a coding makes it (on a
 * thread-pool thread), every request asking for it
 * meanwhile waits for that same one, and the result stays with the version. A version nobody asks
 * for compressed is never compressed, so a live feed replaced several times a second costs
 * compression only as often as it is read, and publishing never waits for it.
 */
import type { Logger } from '../../log.js';
import { compress, type CompressedCoding } from './encoding.js';
import { etagFor, type Variant, type Version } from './version.js';

/**
 * The `coding` variant of `version`: at once when made, a promise while being made, undefined
 * when there is none (compression off, it failed, or it was not smaller than the identity bytes).
 */
export type VariantMaker = (version: Version, coding: CompressedCoding) => Variant | undefined | Promise<Variant | undefined>;

export interface VariantMakerDeps {
  readonly log: Logger;
  /** Compress at all (default true). */
  readonly enabled?: boolean;
  /** Told of every compression under way (the cache's idle() waits for them). */
  readonly track?: (p: Promise<unknown>) => void;
}

export function createVariantMaker(deps: VariantMakerDeps): VariantMaker {
  const enabled = deps.enabled ?? true;
  return (version, coding) => {
    const made = version[coding];
    if (made !== undefined) return made;
    const making = version.making[coding];
    if (making === 'settled' || !enabled) return undefined;
    if (making !== undefined) return making;
    const identity = version.identity.body;
    const p = compress(identity, coding).then(
      (body): Variant | undefined => {
        version.making[coding] = 'settled';
        if (body.length >= identity.length) return undefined;
        const variant: Variant = { coding, body, etag: etagFor(version.entry.sha256, coding) };
        version[coding] = variant;
        return variant;
      },
      (err: unknown) => {
        version.making[coding] = 'settled';
        deps.log.warn({ err, filename: version.entry.filename, coding }, 'compressing a version failed; serving it uncompressed');
        return undefined;
      },
    );
    version.making[coding] = p;
    deps.track?.(p);
    return p;
  };
}
