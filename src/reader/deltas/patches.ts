/**
 * The patches that turn one version of a document into another, as JSON values: JSON Patch
 * (RFC 6902, fast-json-patch: addresses array elements, where the odds are) and JSON Merge Patch
 * (RFC 7396: replaces arrays whole). Each is checked by applying it: one that does not give the
 * target back exactly (as canonical JSON, RFC 8785) is not offered. Used by the reader's deltas and
 * by the deltas bench, so both measure and serve the same thing.
 */
import canonicalize from 'canonicalize';
import jsonpatch from 'fast-json-patch';
import { applyMergePatch, createMergePatch, type Json } from './merge-patch.js';

export type Im = 'json-patch' | 'merge-patch';

/**
 * The patches from `from` to `to` that rebuild `to` exactly (`target`: its canonical JSON).
 * `from` is used up: the JSON Patch is checked by applying it to `from` itself, which saves a copy
 * of the document (the memory of a build is about three documents' worth, not four).
 */
export function makePatches(from: Json, to: Json, target: string = canonicalize(to)!): Partial<Record<Im, unknown>> {
  const out: Partial<Record<Im, unknown>> = {};
  const attempt = (im: Im, make: () => unknown, apply: (p: unknown) => unknown) => {
    try {
      const patch = make();
      if (canonicalize(apply(patch)) === target) out[im] = patch;
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
