/**
 * One pass over a drop's bytes that does what `JSON.parse` + ajv do, without building the
 * document: the tokenizer (json-tokenizer.ts) feeds a schema walk that applies the compiled schema
 * plan (schema-plan.ts) as it goes and notes where the top-level fields the service checks itself
 * (bookmaker, sport, generated_at) lie. Memory: a stack of at most maxDepth frames, plus a few
 * small strings when something is wrong; nothing in proportion to the document.
 *
 * Agreement with the JSON.parse + ajv path, which test/feeds/differential.test.ts checks:
 * - not JSON → `invalid_json`, wherever it is;
 * - the top level not an object → `not_an_object`;
 * - the schema fault reported is the one ajv reports first (allErrors: false): a value's type
 *   before what is inside it, properties in the schema's order (not the document's), items in
 *   index order; with duplicate keys the last occurrence counts, as JSON.parse keeps the last.
 */
import { JsonTokenizer } from './json-tokenizer.js';
import type { JsonSink } from './json-tokens.js';
import { T_ARRAY, T_BOOLEAN, T_INTEGER, T_NULL, T_NUMBER, T_OBJECT, T_STRING, type SchemaPlan } from './schema-plan.js';
import type { ByteRange, DocumentScanner, ScanResult, SchemaFault } from './scan-result.js';

export type { ByteRange, DocumentScanner, ScanResult, SchemaFault } from './scan-result.js';

/** One document, one scanner. `fields`: top-level property names whose last value's position is wanted. */
export function scanDocument(buf: Buffer, from: number, plan: SchemaPlan | null, maxDepth: number, fields: readonly string[]): ScanResult {
  return createDocumentScanner(plan, maxDepth, fields)(buf, from);
}

/**
 * A scanner for many documents, one at a time (it is synchronous); it keeps nothing of a document
 * once done with it. A validator keeps one for its life: V8 keeps the scan's optimized code only
 * while an instance is alive (with a new one per drop, a drop after a pause is checked many times slower).
 */
export function createDocumentScanner(plan: SchemaPlan | null, maxDepth: number, fields: readonly string[]): DocumentScanner {
  const walk = new SchemaWalk(plan, maxDepth, fields);
  const tokenizer = new JsonTokenizer(walk, maxDepth);
  return (buf, from) => {
    walk.reset(buf);
    try {
      const r = tokenizer.run(buf, from);
      if (r.kind !== 'value') return r;
      if (r.top !== 'object') return { kind: 'not_an_object', what: r.top };
      return { kind: 'object', fault: walk.rootFault, members: walk.rootMembers, fields: walk.fieldRanges };
    } finally {
      walk.release();
    }
  };
}

const OBJ = 1;
const ARR = 2;

/** An empty document: what a walk holds between documents, so it keeps no drop's bytes alive. */
const NO_BYTES = Buffer.alloc(0);

interface Name {
  readonly name: string;
  readonly utf8: Buffer;
}

/** The schema side of the scan: applies the plan to the values the tokenizer reports. */
class SchemaWalk implements JsonSink {
  private buf: Buffer = NO_BYTES;
  private readonly fieldNames: readonly Name[];
  fieldRanges: (ByteRange | undefined)[] = [];
  rootFault: SchemaFault | null = null;
  rootMembers = 0;
  private rootField = -1;
  private fieldStart = 0;

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

  constructor(
    private readonly rootPlan: SchemaPlan | null,
    private readonly maxDepth: number,
    fields: readonly string[],
  ) {
    this.fieldNames = fields.map((name) => ({ name, utf8: Buffer.from(name, 'utf8') }));
  }

  /** Start on `buf`: everything of the previous document forgotten, the stack deep enough for this one. */
  reset(buf: Buffer): void {
    this.buf = buf;
    this.fieldRanges = this.fieldNames.map(() => undefined);
    this.depth = 0;
    this.rootFault = null;
    this.rootMembers = 0;
    this.rootField = -1;
    this.fieldStart = 0;
    // No more frames than the limit allows, nor than the document has bytes. The stack only grows.
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
    this.faults.fill(null);
    for (const slots of this.slots) if (slots !== undefined) slots.fill(null);
  }

  openObject(start: number): void {
    this.open(OBJ, this.valueStart(start), T_OBJECT);
  }

  openArray(start: number): void {
    this.open(ARR, this.valueStart(start), T_ARRAY);
  }

  string(start: number, end: number, length: number): void {
    const plan = this.valueStart(start);
    let fault: SchemaFault | null = null;
    if (plan !== null) {
      if ((plan.types & T_STRING) === 0) fault = this.fault(plan.typeMessage);
      else if (length < plan.minLength) fault = this.fault(plan.minLengthMessage);
    }
    this.deliver(fault, end);
  }

  number(start: number, end: number): void {
    const plan = this.valueStart(start);
    let fault: SchemaFault | null = null;
    if (plan !== null && (plan.types & T_NUMBER) === 0) {
      if ((plan.types & T_INTEGER) === 0) fault = this.fault(plan.typeMessage);
      else {
        // ajv's test on the parsed value: 1.0, 1e400 (Infinity) and -0 are integers.
        const v = Number(this.buf.toString('latin1', start, end));
        if (v % 1 || Number.isNaN(v)) fault = this.fault(plan.typeMessage);
      }
    }
    this.deliver(fault, end);
  }

  literal(start: number, end: number, isNull: boolean): void {
    const plan = this.valueStart(start);
    let fault: SchemaFault | null = null;
    if (plan !== null && (plan.types & (isNull ? T_NULL : T_BOOLEAN)) === 0) fault = this.fault(plan.typeMessage);
    this.deliver(fault, end);
  }

  /** A member's key: which planned property, which field. */
  key(start: number, end: number, escaped: boolean): void {
    const d = this.depth - 1;
    this.counts[d] = this.counts[d]! + 1;
    const plan = this.plans[d]!;
    if (plan !== null) this.keyProps[d] = this.match(start, end, escaped, plan.properties!);
    if (d === 0) this.rootField = this.match(start, end, escaped, this.fieldNames);
  }

  closeObject(end: number): void {
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

  closeArray(end: number): void {
    const d = this.depth - 1;
    const fault = this.faults[d]!;
    this.depth = d;
    this.deliver(fault, end);
  }

  /** A value starts at `start`: note where, if it is a top-level member's; returns its plan (from the enclosing frame). */
  private valueStart(start: number): SchemaPlan | null {
    const d = this.depth - 1;
    if (d < 0) return this.rootPlan;
    if (d === 0) this.fieldStart = start;
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

  /** Which of `names` the key is (-1: none). Keys with escapes are decoded, when short enough to match. */
  private match(start: number, end: number, escaped: boolean, names: readonly Name[]): number {
    if (escaped) return this.matchEscaped(start, end, names);
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
  private matchEscaped(start: number, end: number, names: readonly Name[]): number {
    let decoded: string | undefined;
    for (let k = 0; k < names.length; k++) {
      const p = names[k]!;
      // An escape is at most 6 bytes per UTF-16 unit: a longer key cannot be this name.
      if (end - start <= 6 * p.name.length && (decoded ??= JSON.parse(this.buf.toString('utf8', start - 1, end + 1)) as string) === p.name) return k;
    }
    return -1;
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
}
