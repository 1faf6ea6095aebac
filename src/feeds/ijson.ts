/**
 * I-JSON (RFC 7493): the JSON every consumer can read the same way. A published document must be
 * I-JSON, because readers and clients hash, diff and patch it as a JSON value: a number that
 * does not fit an IEEE 754 double (`1e400` reads as Infinity, which has no JSON form), a string
 * with a lone surrogate (no UTF-8 form) or an object with a member name twice (which value counts
 * depends on the parser) cannot be served as the same value to everyone.
 *
 * The tokenizer (json-tokenizer.ts) applies these rules as it reads, for both ways of reading a
 * drop, so they reject alike (reason `not_i_json`, the detail naming the byte). A syntax error
 * anywhere in the file takes precedence: a violation is reported only once the whole file is
 * known to be JSON.
 */

/** The detail of a violation, as the rejection shows it. */
export const notIJson = {
  number: (text: string, at: number) => `the number ${shorten(text)} at byte ${at} does not fit an IEEE 754 double`,
  surrogate: (unit: number, at: number) => `a lone surrogate \\u${unit.toString(16).padStart(4, '0')} in a string at byte ${at}`,
  duplicate: (name: string, at: number) => `the member name ${shorten(JSON.stringify(name))} appears twice in an object (again at byte ${at})`,
};

function shorten(text: string): string {
  return text.length <= 40 ? text : `${text.slice(0, 37)}...`;
}

/**
 * Whether the number written as `text` (valid JSON number grammar) is finite as a double. Only
 * numbers with an exponent or more than 308 digits can overflow, so most cost nothing.
 */
export function numberFits(text: string): boolean {
  return Number.isFinite(Number(text));
}

/** Whether a number of `length` bytes could overflow a double: an exponent, or as many digits as 1e308 or more. */
export function mayOverflow(length: number, hasExponent: boolean): boolean {
  return hasExponent || length > 308;
}

/** Names of an object compared byte for byte, before it keeps them in a Set (many names, or an escaped one). */
const LINEAR_MAX = 16;

/** A bit of a name's length and first byte: two names with different bits differ. */
const bitOf = (buf: Buffer, start: number, end: number) => 1 << ((end - start + buf[start]!) & 31);

/**
 * The member names of the open objects, per depth, reused. An object's first names are kept as
 * byte ranges of the document, in flat arrays indexed by depth, with a 32-bit mask of their
 * length-and-first-byte bits: a name whose bit is not in the mask is new without comparing any
 * bytes (most objects have a few short names, often of one length); otherwise it is compared
 * byte for byte with the names so far. Past LINEAR_MAX names, or once a name has escapes, the
 * object's names are kept in a Set as their UTF-8 bytes in a latin1 string (escaped names decoded
 * first), so that `"a"` and `"\u0061"` are the same name.
 */
export class MemberNames {
  /** At depth d, names k: [start, end) at ranges[(d * LINEAR_MAX + k) * 2]. */
  private ranges = new Int32Array(0);
  private counts = new Int32Array(0);
  private masks = new Int32Array(0);
  /** Per depth: 1 once the object keeps its names in its Set. */
  private inSet = new Uint8Array(0);
  private readonly sets: (Set<string> | undefined)[] = [];

  open(depth: number): void {
    if (this.counts.length <= depth) this.grow(depth);
    this.counts[depth] = 0;
    this.masks[depth] = 0;
    if (this.inSet[depth] === 1) {
      this.inSet[depth] = 0;
      this.sets[depth]!.clear();
    }
  }

  /** Adds the name; returns the name as text when the object already has it, else undefined. */
  add(depth: number, buf: Buffer, start: number, end: number, escaped: boolean): string | undefined {
    if (this.inSet[depth] === 0) {
      const n = this.counts[depth]!;
      if (!escaped && n < LINEAR_MAX) {
        const r = this.ranges;
        const base = depth * LINEAR_MAX * 2;
        const bit = start < end ? bitOf(buf, start, end) : 1;
        const mask = this.masks[depth]!;
        if ((mask & bit) !== 0) {
          const len = end - start;
          for (let k = base; k < base + 2 * n; k += 2) {
            const s = r[k]!;
            if (r[k + 1]! - s === len && sameBytes(buf, s, start, len)) return buf.toString('utf8', start, end);
          }
        }
        r[base + 2 * n] = start;
        r[base + 2 * n + 1] = end;
        this.counts[depth] = n + 1;
        this.masks[depth] = mask | bit;
        return undefined;
      }
      // Many names, or an escaped one: the names so far go into the Set.
      const set = (this.sets[depth] ??= new Set());
      const base = depth * LINEAR_MAX * 2;
      for (let k = base; k < base + 2 * n; k += 2) set.add(buf.toString('latin1', this.ranges[k], this.ranges[k + 1]));
      this.inSet[depth] = 1;
    }
    const set = this.sets[depth]!;
    let name: string;
    if (!escaped) name = buf.toString('latin1', start, end);
    else name = Buffer.from(JSON.parse(buf.toString('utf8', start - 1, end + 1)) as string, 'utf8').toString('latin1');
    if (set.has(name)) return Buffer.from(name, 'latin1').toString('utf8');
    set.add(name);
    return undefined;
  }

  /** Keeps no names of the last document. */
  clear(): void {
    this.counts.fill(0);
    this.masks.fill(0);
    for (let d = 0; d < this.inSet.length; d++) {
      if (this.inSet[d] === 1) this.sets[d]!.clear();
      this.inSet[d] = 0;
    }
  }

  private grow(depth: number): void {
    const size = Math.max(16, 2 * (depth + 1));
    const widen = <T extends Int32Array | Uint8Array>(a: T, make: (n: number) => T, per = 1): T => {
      const b = make(size * per);
      b.set(a);
      return b;
    };
    this.counts = widen(this.counts, (n) => new Int32Array(n));
    this.masks = widen(this.masks, (n) => new Int32Array(n));
    this.inSet = widen(this.inSet, (n) => new Uint8Array(n));
    this.ranges = widen(this.ranges, (n) => new Int32Array(n), LINEAR_MAX * 2);
  }
}

function sameBytes(buf: Buffer, a: number, b: number, len: number): boolean {
  for (let i = 0; i < len; i++) if (buf[a + i] !== buf[b + i]) return false;
  return true;
}
