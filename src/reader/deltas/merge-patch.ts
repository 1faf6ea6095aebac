/**
 * JSON Merge Patch (RFC 7396), written here (about 30 lines) rather than taken from a package:
 * the npm packages for it are small and unmaintained. A merge patch cannot set a member to null
 * (null removes it) and replaces arrays whole: the delta module checks every patch it makes by
 * applying it, and offers none that does not give the new version back.
 */
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const own = (o: object, k: string) => Object.prototype.hasOwnProperty.call(o, k);
/** Sets a member as data, so that a member named `__proto__` stays a member. */
const put = (o: JsonObject, k: string, v: Json) => Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });

/** The merge patch that turns `from` into `to` (as JSON values). */
export function createMergePatch(from: Json, to: Json): Json {
  if (!isObject(from) || !isObject(to)) return to;
  const patch: JsonObject = {};
  for (const k of Object.keys(from)) if (!own(to, k)) put(patch, k, null);
  for (const k of Object.keys(to)) {
    const b = to[k]!;
    if (!own(from, k)) put(patch, k, b);
    else if (JSON.stringify(from[k]) !== JSON.stringify(b)) put(patch, k, isObject(from[k]) && isObject(b) ? createMergePatch(from[k], b) : b);
  }
  return patch;
}

/** RFC 7396 §2 MergePatch(target, patch): a new value; `target` is not changed. */
export function applyMergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return patch;
  const out: JsonObject = {};
  if (isObject(target)) for (const k of Object.keys(target)) put(out, k, target[k]!);
  for (const k of Object.keys(patch)) {
    const v = patch[k]!;
    if (v === null) delete out[k];
    else put(out, k, applyMergePatch(own(out, k) ? out[k]! : null, v));
  }
  return out;
}
