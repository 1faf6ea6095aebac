/**
 * The patches that turn one version of a document into another, as JSON values: JSON Patch
 * (RFC 6902, fast-json-patch: addresses array elements, where the odds are) and JSON Merge Patch
 * (RFC 7396: replaces arrays whole). Each is checked by applying it: one that does not give the
 * target back exactly (the same JSON value: what RFC 8785 would write the same) is not offered.
 * Used by the reader's deltas and by the deltas bench, so both measure and serve the same thing.
 */
import jsonpatch from 'fast-json-patch';
import { applyMergePatch, createMergePatch, type Json } from './merge-patch.js';

export type Im = 'json-patch' | 'merge-patch';
export const IMS: readonly Im[] = ['json-patch', 'merge-patch'];

const own = (o: object, k: string) => Object.prototype.hasOwnProperty.call(o, k);

/**
 * The same JSON value: equal members (in any order) and elements, numbers equal as doubles. The
 * equality of canonical JSON (RFC 8785), without writing either side out.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) if (!own(b, k) || !sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  return true;
}

/**
 * The patches of `ims` from `from` to `to` that rebuild `to` exactly. `from` is used up: the JSON
 * Patch is checked by applying it to `from` itself, which saves a copy of the document (the
 * memory of a build is about three documents' worth, not four).
 */
export function makePatches(from: Json, to: Json, ims: readonly Im[] = IMS): Partial<Record<Im, unknown>> {
  const out: Partial<Record<Im, unknown>> = {};
  const attempt = (im: Im, make: () => unknown, apply: (p: unknown) => unknown) => {
    if (!ims.includes(im)) return;
    try {
      const patch = make();
      if (sameJson(apply(patch), to)) out[im] = patch;
    } catch {
      // Not expressible (e.g. a member named __proto__): that IM is not offered for this pair.
    }
  };
  attempt(
    'merge-patch',
    () => createMergePatch(from, to),
    (p) => applyMergePatch(from, p as Json),
  );
  attempt(
    'json-patch',
    () => jsonpatch.compare(from as object, to as object),
    // A copy of the patch (small), so that applying it in place cannot change the values it holds.
    (p) => jsonpatch.applyPatch(from, jsonpatch.deepClone(p) as jsonpatch.Operation[], false, true, true).newDocument,
  );
  return out;
}
