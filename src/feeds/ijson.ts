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

/**
 * The member names of the open objects, one set per depth, reused: a name is its UTF-8 bytes as a
 * latin1 string (escaped names are decoded first), so that `"a"` and `"\u0061"` are the same name.
 */
export class MemberNames {
  private readonly sets: Set<string>[] = [];

  open(depth: number): void {
    const set = this.sets[depth];
    if (set === undefined) this.sets[depth] = new Set();
    else if (set.size > 0) set.clear();
  }

  /** Adds the name; returns the name as text when the object already has it, else undefined. */
  add(depth: number, buf: Buffer, start: number, end: number, escaped: boolean): string | undefined {
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
    for (const s of this.sets) s?.clear();
  }
}
