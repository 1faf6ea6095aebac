/**
 * A JSON tokenizer over UTF-8 bytes that accepts exactly what JSON.parse accepts (RFC 8259) and
 * tells a sink about each value as it reads it, without building anything. No recursion: the
 * open containers are a stack of at most maxDepth entries, and `too_deep` beyond. The whole input
 * is read before `not_an_object` or a schema fault can be reported, as JSON.parse fails before ajv
 * runs. The input must already be valid UTF-8 (validate.ts checks that first).
 *
 * It also holds the input to I-JSON (ijson.ts): the first violation is noted and reported as
 * `not_i_json` once the whole input is known to be JSON.
 */
import { MemberNames, mayOverflow, notIJson, numberFits } from './ijson.js';
import { HEX, SIMPLE_ESCAPE, show, topLevel, type JsonSink, type TokenizeResult, type TopLevel } from './json-tokens.js';

class InvalidJson extends Error {}

const OBJ = 1;
const ARR = 2;

// What the tokenizer expects next.
const S_VALUE = 0;
const S_AFTER_VALUE = 1;
const S_KEY = 2;
const S_KEY_OR_CLOSE = 3;
const S_VALUE_OR_CLOSE = 4;

/** Tokenizes one document at a time into its sink; synchronous, so one instance serves many documents. */
export class JsonTokenizer {
  private buf: Buffer = Buffer.alloc(0);
  private n = 0;
  private kinds = new Uint8Array(0);
  // Results of the last string read.
  private length = 0;
  private escaped = false;
  /** The first I-JSON violation of the document (ijson.ts), or null. */
  private fault: string | null = null;
  private readonly names = new MemberNames();

  constructor(
    private readonly sink: JsonSink,
    private readonly maxDepth: number,
  ) {}

  /** Read `buf` from `from` (its first byte that is not white space) to the end. */
  run(buf: Buffer, from: number): TokenizeResult {
    try {
      return this.read(buf, from);
    } catch (err) {
      if (err instanceof InvalidJson) return { kind: 'invalid_json', detail: err.message };
      throw err;
    } finally {
      this.buf = Buffer.alloc(0); // keep no document alive between runs
      this.n = 0;
      this.fault = null;
      this.names.clear();
    }
  }

  private read(buf: Buffer, from: number): TokenizeResult {
    this.buf = buf;
    const n = (this.n = buf.length);
    // No more entries than the limit allows, nor than the document has bytes. The stack only grows.
    const size = Math.max(0, Math.min(this.maxDepth, n)) + 1;
    if (this.kinds.length < size) this.kinds = new Uint8Array(size);
    const kinds = this.kinds;
    const sink = this.sink;
    let depth = 0;
    let top: TopLevel = 'object';
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
        if (state === S_AFTER_VALUE && depth === 0) break;
        throw new InvalidJson(`unexpected end of input at byte ${n}`);
      }

      if (state === S_AFTER_VALUE) {
        const d = depth - 1;
        if (d < 0) throw new InvalidJson(`unexpected ${show(c)} after the top-level value at byte ${i}`);
        if (c === 0x2c) {
          i++;
          state = kinds[d] === OBJ ? S_KEY : S_VALUE;
        } else if (c === 0x7d && kinds[d] === OBJ) {
          depth = d;
          sink.closeObject(++i);
        } else if (c === 0x5d && kinds[d] === ARR) {
          depth = d;
          sink.closeArray(++i);
        } else {
          throw new InvalidJson(`unexpected ${show(c)} at byte ${i}: expected ',' or '${kinds[d] === OBJ ? '}' : ']'}'`);
        }
        continue;
      }

      if (state === S_KEY || state === S_KEY_OR_CLOSE) {
        if (c === 0x7d && state === S_KEY_OR_CLOSE) {
          depth--;
          sink.closeObject(++i);
          state = S_AFTER_VALUE;
          continue;
        }
        if (c !== 0x22) throw new InvalidJson(`unexpected ${show(c)} at byte ${i}: expected a property name`);
        const end = this.scanString(i);
        if (this.fault === null) {
          const twice = this.names.add(depth - 1, buf, i + 1, end - 1, this.escaped);
          if (twice !== undefined) this.fault = notIJson.duplicate(twice, i);
        }
        sink.key(i + 1, end - 1, this.escaped);
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
        depth--;
        sink.closeArray(++i);
        state = S_AFTER_VALUE;
        continue;
      }
      if (depth === 0) top = topLevel(c);
      if (c === 0x7b || c === 0x5b) {
        if (depth >= this.maxDepth) return { kind: 'too_deep' };
        kinds[depth++] = c === 0x7b ? OBJ : ARR;
        if (c === 0x7b) {
          this.names.open(depth - 1);
          sink.openObject(i++);
          state = S_KEY_OR_CLOSE;
        } else {
          sink.openArray(i++);
          state = S_VALUE_OR_CLOSE;
        }
        continue;
      }
      if (c === 0x22) {
        const end = this.scanString(i);
        sink.string(i, end, this.length);
        i = end;
      } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
        const end = this.scanNumber(i);
        sink.number(i, end);
        i = end;
      } else if (c === 0x74 || c === 0x66 || c === 0x6e) {
        const word = c === 0x74 ? 'true' : c === 0x66 ? 'false' : 'null';
        for (let k = 1; k < word.length; k++) {
          if (i + k >= n) throw new InvalidJson(`unexpected end of input at byte ${n}`);
          if (buf[i + k] !== word.charCodeAt(k)) throw new InvalidJson(`unexpected ${show(buf[i + k]!)} at byte ${i + k}: expected ${word}`);
        }
        sink.literal(i, i + word.length, c === 0x6e);
        i += word.length;
      } else {
        throw new InvalidJson(`unexpected ${show(c)} at byte ${i}: expected a value`);
      }
      state = S_AFTER_VALUE;
    }
    if (this.fault !== null) return { kind: 'not_i_json', detail: this.fault };
    return { kind: 'value', top };
  }

  /**
   * The string whose opening quote is at `i`: checks it, returns the index after the closing
   * quote, and leaves its length in code points as ajv counts them (ucs2length: a surrogate pair
   * is one) in `length`, and whether it has escapes in `escaped`.
   */
  private scanString(i: number): number {
    const buf = this.buf;
    const n = this.n;
    let j = i + 1;
    let units = 0;
    let escaped = false;
    for (;;) {
      if (j >= n) throw new InvalidJson(`unterminated string starting at byte ${i}`);
      const c = buf[j]!;
      if (c >= 0x20 && c < 0x80 && c !== 0x22 && c !== 0x5c) {
        // Plain ASCII, by far the most common
        units++;
        j++;
        continue;
      }
      if (c === 0x22) break;
      if (c === 0x5c) {
        escaped = true;
        if (j + 1 >= n) throw new InvalidJson(`unterminated string starting at byte ${i}`);
        const e = buf[j + 1]!;
        if (e === 0x75) {
          const v = this.unitAt(j);
          if (v < 0) {
            const bad = buf.subarray(j + 2, Math.min(j + 6, n)).find((h) => HEX[h]! < 0);
            if (bad === undefined) throw new InvalidJson(`unterminated string starting at byte ${i}`);
            throw new InvalidJson(`bad \\u escape at byte ${j}: ${show(bad)} is not a hex digit`);
          }
          units++;
          // A surrogate pair is one unit (as ajv counts); a surrogate not in a pair is not I-JSON.
          // A high one looks ahead for its low one, so no state is carried through the loop.
          if (v >= 0xd800 && v <= 0xdbff) {
            const low = buf[j + 6] === 0x5c && buf[j + 7] === 0x75 ? this.unitAt(j + 6) : -1;
            if (low >= 0xdc00 && low <= 0xdfff) j += 6;
            else if (this.fault === null) this.fault = notIJson.surrogate(v, j);
          } else if (v >= 0xdc00 && v <= 0xdfff && this.fault === null) this.fault = notIJson.surrogate(v, j);
          j += 6;
        } else if (SIMPLE_ESCAPE[e] === 1) {
          units++;
          j += 2;
        } else {
          throw new InvalidJson(`bad escape at byte ${j}: ${show(e)} after a backslash`);
        }
      } else if (c < 0x20) {
        throw new InvalidJson(`control character 0x${c.toString(16).padStart(2, '0')} in a string at byte ${j}`);
      } else {
        // One unit per UTF-8 lead byte; a four-byte character is a surrogate pair, which ajv counts once.
        if ((c & 0xc0) !== 0x80) units++;
        j++;
      }
    }
    this.length = units;
    this.escaped = escaped;
    return j + 1;
  }

  /** The code unit of the `\uXXXX` escape at `j`, or -1 when its four hex digits are not all there. */
  private unitAt(j: number): number {
    const buf = this.buf;
    if (j + 6 > this.n) return -1;
    let v = 0;
    for (let k = 2; k < 6; k++) {
      const h = HEX[buf[j + k]!]!;
      if (h < 0) return -1;
      v = (v << 4) | h;
    }
    return v;
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
    let exponent = false;
    if (j < n && (buf[j] === 0x65 || buf[j] === 0x45)) {
      exponent = true;
      j++;
      if (j < n && (buf[j] === 0x2b || buf[j] === 0x2d)) j++;
      j = this.digits(j, 'a digit in the exponent');
    }
    if (this.fault === null && mayOverflow(j - i, exponent)) {
      const text = buf.toString('latin1', i, j);
      if (!numberFits(text)) this.fault = notIJson.number(text, i);
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
