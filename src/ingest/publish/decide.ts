/**
 * The rule that settles a valid drop against what is published under its filename, before any
 * write: `unchanged` when it is the published version, `superseded` when the published one is
 * newer, otherwise undefined (it goes on to the commit, whose Lua script applies the same rule
 * atomically: src/catalog/commit-script.ts). Used by the publish step and by the dry run of
 * PUT /v1/data, so both answer alike.
 *
 * A document without `generated_at` is stamped with its time of receipt, so the same bytes sent
 * twice would never be the same version: such a version keeps the SHA-256 of the bytes as
 * received (`sourceSha256`), and a drop whose bytes as received have that hash is `unchanged`.
 */
import type { CatalogEntry } from '../../catalog/types.js';

export interface DropIdentity {
  /** SHA-256 of the bytes to publish (stamped when `generated_at` was missing). */
  readonly sha256: string;
  /** SHA-256 of the bytes as received; set only when they were stamped. */
  readonly sourceSha256?: string | undefined;
  readonly generatedAtMs: number;
}

export function decideAgainst(current: CatalogEntry | undefined, drop: DropIdentity): 'unchanged' | 'superseded' | undefined {
  if (!current) return undefined;
  if (current.sha256 === drop.sha256) return 'unchanged';
  if (drop.sourceSha256 !== undefined && current.sourceSha256 === drop.sourceSha256) return 'unchanged';
  if (current.generatedAtMs > drop.generatedAtMs) return 'superseded';
  return undefined;
}

/**
 * Whether `current` is `version` or a newer one: a drop of `version` would be unchanged or
 * superseded, or `current` is a correction (same `generated_at`, other bytes) published after it
 * (or in the same millisecond, which cannot be ordered: the restore from the manifest keeps the
 * catalog's then too, src/catalog/restore.ts).
 */
export function holdsVersion(current: CatalogEntry | undefined, version: DropIdentity & Pick<CatalogEntry, 'generatedAtMs' | 'publishedAt'>): boolean {
  if (!current) return false;
  if (decideAgainst(current, version) !== undefined) return true;
  return current.generatedAtMs === version.generatedAtMs && current.publishedAt >= version.publishedAt;
}
