/**
 * The SHA-256 of a parsed JSON value's canonical form (RFC 8785: members sorted by their names'
 * UTF-16 code units, no whitespace, numbers and strings as ECMAScript's JSON.stringify writes
 * them). JSON.stringify writes it, with a replacer that hands it each object with its members in
 * order (a sorted copy only of an object whose members are not already in order): the native
 * writer is about twice as fast as walking the value in JavaScript. An object can hold its members
 * in any order but one with an array-index name ("7", "10"): JavaScript lists those first, in
 * numeric order. A document with such a name is walked instead, and hashed as it is written.
 */
import { createHash } from 'node:crypto';

class NoCanonicalForm extends Error {}
class IndexNames extends Error {}

const INDEX = /^(?:0|[1-9]\d*)$/;

function inOrder(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i++) if (keys[i - 1]! > keys[i]!) return false;
  return true;
}

function sortedMembers(this: unknown, _key: string, value: unknown): unknown {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new NoCanonicalForm();
    return value;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const o = value as Record<string, unknown>;
  const keys = Object.keys(o);
  if (inOrder(keys)) return o;
  if (keys.some((k) => INDEX.test(k))) throw new IndexNames();
  keys.sort();
  // A prototype-less copy: a member named __proto__ stays a member.
  const copy = Object.create(null) as Record<string, unknown>;
  for (const k of keys) copy[k] = o[k];
  return copy;
}

/**
 * JSON.stringify writes a lone surrogate, in a name or a string, as `\udXXX` (lower-case hex), and
 * never writes a paired one escaped; a backslash of the text itself comes out as `\\`. A match of
 * this pattern that is not `\\` is a lone surrogate.
 */
const ESCAPES = /\\\\|\\ud[89a-f]/g;

function hasLoneSurrogate(json: string): boolean {
  if (!json.includes('\\ud')) return false;
  for (const m of json.matchAll(ESCAPES)) if (m[0] !== '\\\\') return true;
  return false;
}

/** Hex SHA-256 of the canonical JSON of `value`; null when it has none (a number not finite, a lone surrogate). */
export function canonicalSha256(value: unknown): string | null {
  let json: string;
  try {
    json = JSON.stringify(value, sortedMembers);
  } catch (err) {
    if (err instanceof NoCanonicalForm) return null;
    if (err instanceof IndexNames) return walkedSha256(value);
    throw err;
  }
  if (hasLoneSurrogate(json)) return null;
  return createHash('sha256').update(json).digest('hex');
}

const CHUNK = 16 * 1024;

/** No lone surrogate (String.prototype.isWellFormed: Node 20 and later; not in this TypeScript lib). */
const wellFormed = (s: string) => (s as string & { isWellFormed(): boolean }).isWellFormed();

/** The canonical form written by walking the value, member by member, for what JSON.stringify cannot order. */
function walkedSha256(value: unknown): string | null {
  const hash = createHash('sha256');
  let buf = '';
  const put = (s: string) => {
    buf += s;
    if (buf.length >= CHUNK) {
      hash.update(buf);
      buf = '';
    }
  };
  const text = (s: string) => {
    if (!wellFormed(s)) throw new NoCanonicalForm();
    put(JSON.stringify(s));
  };
  const walk = (x: unknown): void => {
    if (typeof x === 'string') return text(x);
    if (typeof x === 'number' && !Number.isFinite(x)) throw new NoCanonicalForm();
    if (x === null || typeof x !== 'object') return put(JSON.stringify(x));
    if (Array.isArray(x)) {
      put('[');
      for (let i = 0; i < x.length; i++) {
        if (i > 0) put(',');
        walk(x[i]);
      }
      return put(']');
    }
    const o = x as Record<string, unknown>;
    put('{');
    let first = true;
    for (const k of Object.keys(o).sort()) {
      if (!first) put(',');
      first = false;
      text(k);
      put(':');
      walk(o[k]);
    }
    put('}');
  };
  try {
    walk(value);
  } catch (err) {
    if (err instanceof NoCanonicalForm) return null;
    throw err;
  }
  hash.update(buf);
  return hash.digest('hex');
}
