/**
 * Cleanup after a manifest write (claim removals, old-version deletes) runs this many calls at a
 * time: a write that covers a burst of commits settles them together instead of one round trip
 * after another, and a store (S3) is not sent hundreds of deletes at once.
 */
export const CLEANUP_BATCH = 8;

export async function inBatches<T>(items: readonly T[], fn: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += CLEANUP_BATCH) await Promise.all(items.slice(i, i + CLEANUP_BATCH).map(fn));
}
