/**
 * One pass over a drop's bytes that does what `JSON.parse` + ajv do, without building the
 * document: a JSON tokenizer (RFC 8259, exactly what JSON.parse accepts) that applies the compiled
 * schema plan (schema-plan.ts) as it goes and notes where the top-level fields the service checks
 * itself (bookmaker, sport, generated_at) lie. No recursion: an explicit stack of at most maxDepth
 * frames, and `too_deep` beyond. Memory: the stack, plus a few small strings when something is
 * wrong; nothing in proportion to the document.
 *
 * Agreement with the JSON.parse + ajv path, which the differential property test checks:
 * - not JSON → `invalid_json`, wherever it is (the whole input is read before anything else is
 *   reported, as JSON.parse does);
 * - the top level not an object → `not_an_object`;
 * - the schema fault reported is the one ajv reports first (allErrors: false): a value's type
 *   before what is inside it, properties in the schema's order (not the document's), items in
 *   index order; with duplicate keys the last occurrence counts, as JSON.parse keeps the last.
 * The input must already be valid UTF-8 (validate.ts checks that first).
 */
import * as plans from './schema-plan.js';
import type { SchemaPlan } from './schema-plan.js';

// Copied once into plain constants: the hot loop should not go through module bindings.
const T_STRING = plans.T_STRING;
const T_NUMBER = plans.T_NUMBER;
const T_INTEGER = plans.T_INTEGER;
const T_BOOLEAN = plans.T_BOOLEAN;
const T_NULL = plans.T_NULL;
const T_ARRAY = plans.T_ARRAY;
const T_OBJECT = plans.T_OBJECT;

/** What ajv would say first (ajv's instancePath and message). */
export interface SchemaFault {
  readonly instancePath: string;
  readonly message: string;
}

/** Where a value lies in the bytes: [start, end). */
export interface ByteRange {
  readonly start: number;
  readonly end: number;
}

export type ScanResult =
  | { readonly kind: 'invalid_json'; readonly detail: string }
  | { readonly kind: 'too_deep' }
  /** `what` as the JSON.parse path words it: "an array", "null", "string", "number", "boolean". */
  | { readonly kind: 'not_an_object'; readonly what: string }
  | {
      readonly kind: 'object';
      /** The first schema fault, or null when the document matches the schema. */
      readonly fault: SchemaFault | null;
      /** Number of top-level members (duplicates counted): 0 for `{}`. */
      readonly members: number;
      /** For each of the requested top-level names, where its last value lies, if present. */
      readonly fields: readonly (ByteRange | undefined)[];
    };

class InvalidJson extends Error {}

const OBJ = 1;
const ARR = 2;

// What the tokenizer expects next.
const S_VALUE = 0;
const S_AFTER_VALUE = 1;
const S_KEY = 2;
const S_KEY_OR_CLOSE = 3;
const S_VALUE_OR_CLOSE = 4;

const HEX = new Int8Array(256).fill(-1);
for (let c = 0; c < 10; c++) HEX[0x30 + c] = c;
for (let c = 0; c < 6; c++) {
  HEX[0x41 + c] = 10 + c;
  HEX[0x61 + c] = 10 + c;
}
/** Characters allowed after a backslash, other than `u`: " \ / b f n r t. */
const SIMPLE_ESCAPE = new Uint8Array(256);
for (const c of '"\\/bfnrt') SIMPLE_ESCAPE[c.charCodeAt(0)] = 1;

function show(c: number): string {
  if (c >= 0x21 && c <= 0x7e) return `'${String.fromCharCode(c)}'`;
  return `byte 0x${c.toString(16).padStart(2, '0')}`;
}

/**
 * Scan `buf` from `from` (the first byte that is not white space) to the end. `fields` are
 * top-level property names whose last value's position is wanted. A scanner of its own for this
 * one call: what scans many documents keeps one (createDocumentScanner, and why there).
 */
export function scanDocument(buf: Buffer, from: number, plan: SchemaPlan | null, maxDepth: number, fields: readonly string[]): ScanResult {
  return createDocumentScanner(plan, maxDepth, fields)(buf, from);
}

/** scanDocument with the plan, depth and fields fixed: what a validator keeps for its life. */
export type DocumentScanner = (buf: Buffer, from: number) => ScanResult;

/**
 * One Scanner, reused for every document (scans are synchronous, so never two at once). Keeping
 * an instance alive is what keeps the scan fast after a quiet spell: V8 holds the hidden classes
 * of an object's fields weakly, so when no Scanner was alive a garbage collection (the memory
 * reducer's, in an idle worker) could free them, and with them went the optimized code of the
 * scan, which checks for them. The next drop was then scanned in the interpreter at ~20 times the
 * cost: 15–25 ms instead of ~1 ms for 200 KB, the tail of freshness for a feed after a pause
 * (docs/BENCHMARKS.md, freshness). test/feeds.scan.test.ts checks that a reused scanner forgets
 * everything of the previous document.
 */
export function createDocumentScanner(plan: SchemaPlan | null, maxDepth: number, fields: readonly string[]): DocumentScanner {
  const scanner = new Scanner(plan, maxDepth, fields);
  return (buf, from) => {
    try {
      return scanner.run(buf, from);
    } catch (err) {
      if (err instanceof InvalidJson) return { kind: 'invalid_json', detail: err.message };
      throw err;
    } finally {
      scanner.release();
    }
  };
}

/** An empty document: what a scanner holds between scans, so it keeps no drop's bytes alive. */
const NO_BYTES = Buffer.alloc(0);

class Scanner {
  // The document being scanned (NO_BYTES between scans).
  private buf: Buffer = NO_BYTES;
  private n = 0;
  private readonly fieldNames: readonly { readonly name: string; readonly utf8: Buffer }[];
  private fieldRanges: (ByteRange | undefined)[] = [];

  // The stack: frame d is the container at depth d + 1. Frames are (re)set as they are opened.
  private depth = 0;
  private kinds = new Uint8Array(0);
  /** The container's plan when there is something to check inside it (properties / items), else null. */
  private plans: (SchemaPlan | null)[] = [];
  /** The container's own fault (its type), or for an array the first fault of its items. */
  private faults: (SchemaFault | null)[] = [];
  /** Objects: members so far. Arrays: index of the current item (= items completed). */
  private counts = new Float64Array(0);
  /** Objects: which planned property the current member is (-1: none). */
  private keyProps = new Int32Array(0);
  /** Objects with planned properties: the fault of each property's last value. Reused per depth. */
  private readonly slots: (SchemaFault | null)[][] = [];

  private rootFault: SchemaFault | null = null;
  private rootMembers = 0;
  private rootField = -1;
  private fieldStart = 0;
  private top = '';

  // Results of the last string scanned.
  private units = 0;
  private escaped = false;

  constructor(
    private readonly rootPlan: SchemaPlan | null,
    private readonly maxDepth: number,
    fields: readonly string[],
  ) {
    this.fieldNames = fields.map((name) => ({ name, utf8: Buffer.from(name, 'utf8') }));
  }

  /** Start on `buf`: everything of the previous document forgotten, the stack deep enough for this one. */
  private reset(buf: Buffer): void {
    this.buf = buf;
    this.n = buf.length;
    this.fieldRanges = this.fieldNames.map(() => undefined);
    this.depth = 0;
    this.rootFault = null;
    this.rootMembers = 0;
    this.rootField = -1;
    this.fieldStart = 0;
    this.top = '';
    this.units = 0;
    this.escaped = false;
    // No more frames than the limit allows, nor than the document has bytes: a small drop never
    // makes a stack of max_depth (up to 10,000) frames. The stack only grows.
    const size = Math.max(0, Math.min(this.maxDepth, buf.length)) + 1;
    if (this.kinds.length < size) {
      this.kinds = new Uint8Array(size);
      this.plans = new Array<SchemaPlan | null>(size).fill(null);
      this.faults = new Array<SchemaFault | null>(size).fill(null);
      this.counts = new Float64Array(size);
      this.keyProps = new Int32Array(size);
    }
  }

  /** Let go of the document and of what its frames pointed to (plans stay: they are the validator's). */
  release(): void {
    this.buf = NO_BYTES;
    this.n = 0;
    this.faults.fill(null);
    for (const slots of this.slots) if (slots !== undefined) slots.fill(null);
  }

  run(buf: Buffer, from: number): ScanResult {
    this.reset(buf);
    const n = this.n;
    let i = from;
    let state = S_VALUE;
    for (;;) {
      let c = 0;
      while (i < n) {
        c = buf[i]!;
        if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
        else break;
      }
      if (i >= n) {
        if (state === S_AFTER_VALUE && this.depth === 0) break;
        throw new InvalidJson(`unexpected end of input at byte ${n}`);
      }

      if (state === S_AFTER_VALUE) {
        const d = this.depth - 1;
        if (d < 0) throw new InvalidJson(`unexpected ${show(c)} after the top-level value at byte ${i}`);
        if (c === 0x2c) {
          i++;
          state = this.kinds[d] === OBJ ? S_KEY : S_VALUE;
        } else if (c === 0x7d && this.kinds[d] === OBJ) {
          this.closeObject(++i);
        } else if (c === 0x5d && this.kinds[d] === ARR) {
          this.closeArray(++i);
        } else {
          throw new InvalidJson(`unexpected ${show(c)} at byte ${i}: expected ',' or '${this.kinds[d] === OBJ ? '}' : ']'}'`);
        }
        continue;
      }

      if (state === S_KEY || state === S_KEY_OR_CLOSE) {
        if (c === 0x7d && state === S_KEY_OR_CLOSE) {
          this.closeObject(++i);
          state = S_AFTER_VALUE;
          continue;
        }
        if (c !== 0x22) throw new InvalidJson(`unexpected ${show(c)} at byte ${i}: expected a property name`);
        const end = this.scanString(i);
        this.member(i + 1, end - 1);
        i = end;
        while (i < n) {
          c = buf[i]!;
          if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
          else break;
        }
        if (i >= n) throw new InvalidJson(`unexpected end of input at byte ${n}`);
        if (c !== 0x3a) throw new InvalidJson(`unexpected ${show(c)} at byte ${i}: expected ':'`);
        i++;
        state = S_VALUE;
        continue;
      }

      // S_VALUE or S_VALUE_OR_CLOSE
      if (c === 0x5d && state === S_VALUE_OR_CLOSE) {
        this.closeArray(++i);
        state = S_AFTER_VALUE;
        continue;
      }
      const plan = this.valuePlan();
      if (this.depth === 0) this.top = c === 0x7b ? 'object' : c === 0x5b ? 'an array' : c === 0x22 ? 'string' : c === 0x6e ? 'null' : c === 0x74 || c === 0x66 ? 'boolean' : 'number';
      else if (this.depth === 1) this.fieldStart = i;
      if (c === 0x7b) {
        this.open(OBJ, plan, T_OBJECT);
        i++;
        state = S_KEY_OR_CLOSE;
      } else if (c === 0x5b) {
        this.open(ARR, plan, T_ARRAY);
        i++;
        state = S_VALUE_OR_CLOSE;
      } else if (c === 0x22) {
        const end = this.scanString(i);
        let fault: SchemaFault | null = null;
        if (plan !== null) {
          if ((plan.types & T_STRING) === 0) fault = this.fault(plan.typeMessage);
          else if (this.units < plan.minLength) fault = this.fault(plan.minLengthMessage);
        }
        i = end;
        this.deliver(fault, i);
        state = S_AFTER_VALUE;
      } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
        const end = this.scanNumber(i);
        let fault: SchemaFault | null = null;
        if (plan !== null && (plan.types & T_NUMBER) === 0) {
          if ((plan.types & T_INTEGER) === 0) fault = this.fault(plan.typeMessage);
          else {
            // ajv's test on the parsed value: 1.0, 1e400 (Infinity) and -0 are integers.
            const v = Number(buf.toString('latin1', i, end));
            if (v % 1 || Number.isNaN(v)) fault = this.fault(plan.typeMessage);
          }
        }
        i = end;
        this.deliver(fault, i);
        state = S_AFTER_VALUE;
      } else if (c === 0x74 || c === 0x66 || c === 0x6e) {
        const word = c === 0x74 ? 'true' : c === 0x66 ? 'false' : 'null';
        for (let k = 1; k < word.length; k++) {
          if (i + k >= n) throw new InvalidJson(`unexpected end of input at byte ${n}`);
          if (buf[i + k] !== word.charCodeAt(k)) throw new InvalidJson(`unexpected ${show(buf[i + k]!)} at byte ${i + k}: expected ${word}`);
        }
        let fault: SchemaFault | null = null;
        if (plan !== null && (plan.types & (c === 0x6e ? T_NULL : T_BOOLEAN)) === 0) fault = this.fault(plan.typeMessage);
        i += word.length;
        this.deliver(fault, i);
        state = S_AFTER_VALUE;
      } else {
        throw new InvalidJson(`unexpected ${show(c)} at byte ${i}: expected a value`);
      }
      if (this.depth > this.maxDepth) return { kind: 'too_deep' };
    }

    if (this.top !== 'object') return { kind: 'not_an_object', what: this.top };
    return { kind: 'object', fault: this.rootFault, members: this.rootMembers, fields: this.fieldRanges };
  }

  /** The plan for the value about to start: from the enclosing container's frame. */
  private valuePlan(): SchemaPlan | null {
    const d = this.depth - 1;
    if (d < 0) return this.rootPlan;
    const p = this.plans[d]!;
    if (p === null) return null;
    if (this.kinds[d] === OBJ) {
      const k = this.keyProps[d]!;
      return k < 0 ? null : p.properties![k]!.plan;
    }
    return this.faults[d] === null ? p.items : null; // after an item's fault, ajv looks no further
  }

  private open(kind: number, plan: SchemaPlan | null, type: number): void {
    const d = this.depth;
    if (d >= this.maxDepth) {
      this.depth = d + 1; // the caller reports too_deep
      return;
    }
    let inner: SchemaPlan | null = null;
    let fault: SchemaFault | null = null;
    if (plan !== null) {
      if ((plan.types & type) === 0) fault = this.fault(plan.typeMessage);
      else if (kind === OBJ ? plan.properties !== null : plan.items !== null) inner = plan;
    }
    this.kinds[d] = kind;
    this.plans[d] = inner;
    this.faults[d] = fault;
    this.counts[d] = 0;
    this.keyProps[d] = -1;
    if (kind === OBJ && inner !== null) {
      const n = inner.properties!.length;
      let slots = this.slots[d];
      if (slots === undefined || slots.length !== n) this.slots[d] = slots = new Array<SchemaFault | null>(n).fill(null);
      else for (let k = 0; k < n; k++) slots[k] = null;
    }
    this.depth = d + 1;
  }

  private closeObject(end: number): void {
    const d = this.depth - 1;
    let fault = this.faults[d]!;
    const plan = this.plans[d]!;
    if (fault === null && plan !== null) {
      const slots = this.slots[d]!;
      for (let k = 0; k < slots.length; k++) {
        if (slots[k] !== null) {
          fault = slots[k]!;
          break;
        }
      }
    }
    if (d === 0) this.rootMembers = this.counts[0]!;
    this.depth = d;
    this.deliver(fault, end);
  }

  private closeArray(end: number): void {
    const d = this.depth - 1;
    const fault = this.faults[d]!;
    this.depth = d;
    this.deliver(fault, end);
  }

  /** A value ended at `end` (exclusive) with this fault (null: none): tell its container. */
  private deliver(fault: SchemaFault | null, end: number): void {
    const d = this.depth - 1;
    if (d < 0) {
      this.rootFault = fault;
      return;
    }
    if (this.kinds[d] === OBJ) {
      const k = this.keyProps[d]!;
      // Overwrite, fault or not: a later duplicate key replaces the earlier value.
      if (k >= 0 && this.plans[d] !== null) this.slots[d]![k] = fault;
      if (d === 0 && this.rootField >= 0) this.fieldRanges[this.rootField] = { start: this.fieldStart, end };
    } else {
      if (fault !== null && this.faults[d] === null) this.faults[d] = fault;
      this.counts[d] = this.counts[d]! + 1;
    }
  }

  /** A member's key, between the quotes at start - 1 and end: which planned property, which field. */
  private member(start: number, end: number): void {
    const d = this.depth - 1;
    this.counts[d] = this.counts[d]! + 1;
    const plan = this.plans[d]!;
    if (plan !== null) this.keyProps[d] = this.match(start, end, plan.properties!);
    if (d === 0) this.rootField = this.match(start, end, this.fieldNames);
  }

  /** Which of `names` the key is (-1: none). Keys with escapes are decoded, when short enough to match. */
  private match(start: number, end: number, names: readonly { readonly name: string; readonly utf8: Buffer }[]): number {
    if (this.escaped) return this.matchEscaped(start, end, names);
    const buf = this.buf;
    const len = end - start;
    next: for (let k = 0; k < names.length; k++) {
      const name = names[k]!.utf8;
      if (name.length !== len) continue;
      for (let b = 0; b < len; b++) if (buf[start + b] !== name[b]) continue next;
      return k;
    }
    return -1;
  }

  /** match() for a key with escapes: decoded (once, and only when short enough to be a name) and compared as text. */
  private matchEscaped(start: number, end: number, names: readonly { readonly name: string; readonly utf8: Buffer }[]): number {
    let decoded: string | undefined;
    for (let k = 0; k < names.length; k++) {
      const p = names[k]!;
      // An escape is at most 6 bytes per UTF-16 unit: a longer key cannot be this name.
      if (end - start <= 6 * p.name.length && (decoded ??= this.decodeKey(start, end)) === p.name) return k;
    }
    return -1;
  }

  /** A key with escapes, decoded (only keys short enough to be a name get here). */
  private decodeKey(start: number, end: number): string {
    return JSON.parse(this.buf.toString('utf8', start - 1, end + 1)) as string;
  }

  /** A fault at the value about to be (or just) read: its path is the open frames'. */
  private fault(message: string): SchemaFault {
    let path = '';
    for (let d = 0; d < this.depth; d++) {
      if (this.kinds[d] === OBJ) path += `/${this.plans[d]!.properties![this.keyProps[d]!]!.pointer}`;
      else path += `/${this.counts[d]!}`;
    }
    return { instancePath: path, message };
  }

  /**
   * The string whose opening quote is at `i`: checks it, returns the index after the closing
   * quote, and leaves its length in code points as ajv counts them (ucs2length: a surrogate pair
   * is one) in `units`, and whether it has escapes in `escaped`.
   */
  private scanString(i: number): number {
    const buf = this.buf;
    const n = this.n;
    let j = i + 1;
    let units = 0;
    let escaped = false;
    let pendingHigh = false; // the last unit was a \uD800-\uDBFF escape
    for (;;) {
      if (j >= n) throw new InvalidJson(`unterminated string starting at byte ${i}`);
      const c = buf[j]!;
      if (c >= 0x20 && c < 0x80 && c !== 0x22 && c !== 0x5c) {
        // Plain ASCII, by far the most common
        units++;
        pendingHigh = false;
        j++;
        continue;
      }
      if (c === 0x22) break;
      if (c === 0x5c) {
        escaped = true;
        if (j + 1 >= n) throw new InvalidJson(`unterminated string starting at byte ${i}`);
        const e = buf[j + 1]!;
        if (e === 0x75) {
          let v = 0;
          for (let k = 2; k < 6; k++) {
            if (j + k >= n) throw new InvalidJson(`unterminated string starting at byte ${i}`);
            const h = HEX[buf[j + k]!]!;
            if (h < 0) throw new InvalidJson(`bad \\u escape at byte ${j}: ${show(buf[j + k]!)} is not a hex digit`);
            v = (v << 4) | h;
          }
          if (pendingHigh && v >= 0xdc00 && v <= 0xdfff) pendingHigh = false;
          else {
            units++;
            pendingHigh = v >= 0xd800 && v <= 0xdbff;
          }
          j += 6;
        } else if (SIMPLE_ESCAPE[e] === 1) {
          units++;
          pendingHigh = false;
          j += 2;
        } else {
          throw new InvalidJson(`bad escape at byte ${j}: ${show(e)} after a backslash`);
        }
      } else if (c < 0x20) {
        throw new InvalidJson(`control character 0x${c.toString(16).padStart(2, '0')} in a string at byte ${j}`);
      } else {
        // One unit per UTF-8 lead byte; a four-byte character is a surrogate pair, which ajv counts once.
        if ((c & 0xc0) !== 0x80) {
          units++;
          pendingHigh = false;
        }
        j++;
      }
    }
    this.units = units;
    this.escaped = escaped;
    return j + 1;
  }

  /** The number starting at `i` (RFC 8259 grammar); returns the index after it. */
  private scanNumber(i: number): number {
    const buf = this.buf;
    const n = this.n;
    let j = i;
    if (buf[j] === 0x2d) j++;
    // A leading 0 stands alone: in "01" the number ends after the 0, and the 1 is then unexpected.
    if (j < n && buf[j] === 0x30) j++;
    else j = this.digits(j, 'a digit');
    if (j < n && buf[j] === 0x2e) j = this.digits(j + 1, 'a digit after the decimal point');
    if (j < n && (buf[j] === 0x65 || buf[j] === 0x45)) {
      j++;
      if (j < n && (buf[j] === 0x2b || buf[j] === 0x2d)) j++;
      j = this.digits(j, 'a digit in the exponent');
    }
    return j;
  }

  /** One or more digits from `j`; returns the index after them. */
  private digits(j: number, what: string): number {
    const buf = this.buf;
    const n = this.n;
    if (j >= n) throw new InvalidJson(`unexpected end of input at byte ${n}: expected ${what}`);
    let c = buf[j]!;
    if (c < 0x30 || c > 0x39) throw new InvalidJson(`unexpected ${show(c)} at byte ${j}: expected ${what}`);
    do {
      j++;
      c = j < n ? buf[j]! : 0;
    } while (c >= 0x30 && c <= 0x39);
    return j;
  }
}

/**
 * A top-level value too large to decode for a message (bookmaker, sport, generated_at of more
 * than the limit): it stands in for the value, compares unequal to every string, and prints as
 * a description instead of the value.
 */
export class ElidedValue {
  constructor(readonly description: string) {}
  toString(): string {
    return this.description;
  }
  toJSON(): string {
    return this.description;
  }
}

/** Decode the value at `range` (JSON.parse of just those bytes), or elide it beyond `limit` bytes. */
export function decodeValue(buf: Buffer, range: ByteRange, limit: number): unknown {
  const size = range.end - range.start;
  if (size <= limit) return JSON.parse(buf.toString('utf8', range.start, range.end)) as unknown;
  const c = buf[range.start];
  const what = c === 0x22 ? 'a string' : c === 0x7b ? 'an object' : c === 0x5b ? 'an array' : 'a value';
  return new ElidedValue(`(${what} of ${size} bytes)`);
}
