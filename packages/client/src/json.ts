/**
 * The JSON the client needs without a package: canonical JSON (RFC 8785, to check a patched
 * version against the server's Json-Canonical-Sha256), applying a JSON Patch (RFC 6902), and
 * writing a value back in the layout of the file it came from, so that a patched version can be
 * byte-identical to the published one (checked by its SHA-256; when it is not, the whole file is
 * fetched instead).
 */

/** RFC 8785: members sorted by UTF-16 code units, no whitespace, numbers as ECMAScript writes them. */
export function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj)
    .filter((k) => obj[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(obj[k])}`).join(',')}}`;
}

export interface PatchOp {
  readonly op: 'add' | 'remove' | 'replace' | 'move' | 'copy' | 'test';
  readonly path: string;
  readonly from?: string;
  readonly value?: unknown;
}

type Container = Record<string, unknown> | unknown[];

function tokens(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new Error(`not a JSON pointer: ${pointer}`);
  return pointer
    .slice(1)
    .split('/')
    .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function index(arr: unknown[], token: string, forAdd: boolean): number {
  if (forAdd && token === '-') return arr.length;
  if (!/^(0|[1-9]\d*)$/.test(token)) throw new Error(`not an array index: ${token}`);
  const i = Number(token);
  if (i > arr.length || (!forAdd && i === arr.length)) throw new Error(`array index out of range: ${token}`);
  return i;
}

function own(obj: Record<string, unknown>, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(obj, key);
}

/** Set a member as JSON.parse would (own, enumerable), even one named __proto__. */
function setMember(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
}

function parentOf(doc: unknown, path: string): { parent: Container; last: string } {
  const t = tokens(path);
  if (t.length === 0) throw new Error('the root has no parent');
  let cur: unknown = doc;
  for (const tok of t.slice(0, -1)) {
    if (Array.isArray(cur)) cur = cur[index(cur, tok, false)];
    else if (cur !== null && typeof cur === 'object' && own(cur as Record<string, unknown>, tok)) cur = (cur as Record<string, unknown>)[tok];
    else throw new Error(`no such path: ${path}`);
  }
  if (cur === null || typeof cur !== 'object') throw new Error(`no such path: ${path}`);
  return { parent: cur as Container, last: t[t.length - 1]! };
}

function get(doc: unknown, path: string): unknown {
  if (path === '') return doc;
  const { parent, last } = parentOf(doc, path);
  if (Array.isArray(parent)) return parent[index(parent, last, false)];
  if (!own(parent, last)) throw new Error(`no such path: ${path}`);
  return parent[last];
}

function add(doc: unknown, path: string, value: unknown): unknown {
  if (path === '') return value;
  const { parent, last } = parentOf(doc, path);
  if (Array.isArray(parent)) parent.splice(index(parent, last, true), 0, value);
  else setMember(parent, last, value);
  return doc;
}

function remove(doc: unknown, path: string): unknown {
  const { parent, last } = parentOf(doc, path);
  if (Array.isArray(parent)) parent.splice(index(parent, last, false), 1);
  else if (own(parent, last)) delete parent[last];
  else throw new Error(`no such path: ${path}`);
  return doc;
}

function replace(doc: unknown, path: string, value: unknown): unknown {
  if (path === '') return value;
  const { parent, last } = parentOf(doc, path);
  if (Array.isArray(parent)) parent[index(parent, last, false)] = value;
  else if (own(parent, last)) setMember(parent, last, value);
  else throw new Error(`no such path: ${path}`);
  return doc;
}

const clone = (v: unknown): unknown => (v === null || typeof v !== 'object' ? v : (JSON.parse(JSON.stringify(v)) as unknown));

/**
 * Apply `ops` to `doc` (changed in place; the result is returned, as the root may be replaced).
 * `maxCopiedChars`: what `copy` operations may duplicate in all (as JSON text); a few bytes of
 * copies of copies would otherwise grow a document exponentially.
 */
export function applyPatch(doc: unknown, ops: readonly PatchOp[], maxCopiedChars = Infinity): unknown {
  if (!Array.isArray(ops)) throw new Error('a JSON Patch is an array');
  let copied = 0;
  for (const o of ops) {
    switch (o.op) {
      case 'add':
        doc = add(doc, o.path, clone(o.value));
        break;
      case 'remove':
        doc = remove(doc, o.path);
        break;
      case 'replace':
        doc = replace(doc, o.path, clone(o.value));
        break;
      case 'move': {
        const v = get(doc, o.from ?? '');
        doc = add(remove(doc, o.from ?? ''), o.path, v);
        break;
      }
      case 'copy': {
        const v = get(doc, o.from ?? '');
        const text = v === undefined ? undefined : JSON.stringify(v);
        if ((copied += text?.length ?? 0) > maxCopiedChars) throw new Error(`the patch copies more than ${maxCopiedChars} characters`);
        doc = add(doc, o.path, text === undefined ? v : (JSON.parse(text) as unknown));
        break;
      }
      case 'test':
        if (canonical(get(doc, o.path)) !== canonical(o.value)) throw new Error(`test failed at ${o.path}`);
        break;
      default:
        throw new Error(`unknown JSON Patch op: ${String((o as { op: unknown }).op)}`);
    }
  }
  return doc;
}

/** How a file's JSON is laid out: the indent of JSON.stringify, and a final newline. */
export interface Layout {
  readonly indent: string;
  readonly newline: boolean;
}

/** The layout of `text`, when it looks like JSON.stringify's (compact or indented); else undefined. */
export function layoutOf(text: string): Layout | undefined {
  if (text.includes('\r')) return undefined;
  const newline = text.endsWith('\n') && !text.endsWith('\n\n');
  const m = /^[[{]\n([ \t]+)\S/.exec(text);
  if (m) return { indent: m[1]!, newline };
  if (/^[[{][^\n]/.test(text) || /^[[{]\n?[\]}]/.test(text)) return { indent: '', newline };
  return undefined;
}

export function serialize(value: unknown, layout: Layout): string {
  return JSON.stringify(value, null, layout.indent) + (layout.newline ? '\n' : '');
}
