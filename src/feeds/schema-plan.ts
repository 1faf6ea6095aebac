/**
 * Compiles the loose document schema (schemas/document.schema.json) into a tree of per-path checks
 * that the one-pass scanner (scan.ts) applies while it reads the bytes, without building the
 * document. Only the keywords the schema uses are supported: `type` (one type or several,
 * "integer" and "null" included), `properties`, `items` (one schema for every item) and
 * `minLength`, plus annotations, which change nothing. A schema using anything else compiles to
 * `unsupported`, and the caller must then use ajv: the plan can never accept what ajv rejects.
 *
 * The plan reproduces what ajv (v8, `allErrors: false`, `strict: false`) reports first: a node's
 * type before anything inside it, properties in the order of the schema's keys, items in index
 * order, and ajv's messages ("must be string,integer", "must NOT have fewer than 1 characters").
 */

/** JSON types as bit flags, so a node's allowed types are one number. */
export const T_STRING = 1;
export const T_NUMBER = 2;
export const T_INTEGER = 4;
export const T_BOOLEAN = 8;
export const T_NULL = 16;
export const T_ARRAY = 32;
export const T_OBJECT = 64;
export const T_ANY = 127;

const TYPE_BITS: Readonly<Record<string, number>> = {
  string: T_STRING,
  number: T_NUMBER,
  integer: T_INTEGER,
  boolean: T_BOOLEAN,
  null: T_NULL,
  array: T_ARRAY,
  object: T_OBJECT,
};

/** Keywords that never make a document invalid (ajv's metadata vocabulary, plus $schema/$id/$comment). */
const ANNOTATIONS = new Set(['$schema', '$id', '$comment', 'title', 'description', 'examples', 'deprecated', 'readOnly', 'writeOnly']);
const SUPPORTED = new Set(['type', 'properties', 'items', 'minLength']);

/** The checks for one place in the document. A place with nothing to check has no plan (null). */
export interface SchemaPlan {
  /** The allowed types (T_* flags); T_ANY when the schema says no `type`. */
  readonly types: number;
  /** ajv's message when the type is wrong: "must be string", "must be number,null". */
  readonly typeMessage: string;
  /** Strings shorter than this many code points fail (0: no check). */
  readonly minLength: number;
  readonly minLengthMessage: string;
  /** The properties with something to check, in the order ajv checks them; null for none. */
  readonly properties: readonly PropertyPlan[] | null;
  /** The plan for every item of an array; null for none. */
  readonly items: SchemaPlan | null;
}

export interface PropertyPlan {
  readonly name: string;
  /** The name as UTF-8, to compare with a key's bytes. */
  readonly utf8: Buffer;
  /** The name as a JSON Pointer segment (`~` → `~0`, `/` → `~1`), as in ajv's instancePath. */
  readonly pointer: string;
  readonly plan: SchemaPlan;
}

export type PlanResult = { readonly ok: true; readonly plan: SchemaPlan | null } | { readonly ok: false; readonly unsupported: string };

class Unsupported extends Error {}

/** Compile a schema, or say why it cannot be checked in one pass. */
export function compileSchemaPlan(schema: unknown): PlanResult {
  try {
    return { ok: true, plan: compileNode(schema, '#') };
  } catch (err) {
    if (err instanceof Unsupported) return { ok: false, unsupported: err.message };
    throw err;
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function compileNode(schema: unknown, at: string): SchemaPlan | null {
  if (schema === true) return null;
  if (!isPlainObject(schema)) throw new Unsupported(`${at}: ${schema === false ? 'the schema false' : 'not a schema object'}`);
  for (const key of Object.keys(schema)) {
    if (!SUPPORTED.has(key) && !ANNOTATIONS.has(key)) throw new Unsupported(`${at}: the keyword "${key}"`);
  }

  let types = T_ANY;
  let typeMessage = '';
  if ('type' in schema) {
    const list = typeof schema.type === 'string' ? [schema.type] : schema.type;
    if (!Array.isArray(list) || list.length === 0) throw new Unsupported(`${at}/type: not a type or a list of types`);
    types = 0;
    for (const t of list) {
      const bit = typeof t === 'string' && Object.prototype.hasOwnProperty.call(TYPE_BITS, t) ? TYPE_BITS[t]! : 0;
      if (bit === 0 || (types & bit) !== 0) throw new Unsupported(`${at}/type: ${JSON.stringify(t)}`);
      types |= bit;
    }
    // ajv interpolates the keyword's value: an array prints joined with commas.
    typeMessage = `must be ${String(schema.type as string | string[])}`;
  }

  let minLength = 0;
  if ('minLength' in schema) {
    const n = schema.minLength;
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) throw new Unsupported(`${at}/minLength: not a whole number`);
    minLength = n;
  }

  let properties: PropertyPlan[] | null = null;
  if ('properties' in schema) {
    const props = schema.properties;
    if (!isPlainObject(props)) throw new Unsupported(`${at}/properties: not an object`);
    properties = [];
    // Object.keys: the order ajv generates its checks in (integer-like names first, as in JS).
    for (const name of Object.keys(props)) {
      // ajv reads data[name], inherited properties included, and skips "__proto__": stay out of that.
      if (name in Object.prototype) throw new Unsupported(`${at}/properties: the name "${name}"`);
      const plan = compileNode(props[name], `${at}/properties/${name}`);
      if (plan === null) continue; // always valid: ajv skips it too
      properties.push({ name, utf8: Buffer.from(name, 'utf8'), pointer: name.replace(/~/g, '~0').replace(/\//g, '~1'), plan });
    }
    if (properties.length === 0) properties = null;
  }

  let items: SchemaPlan | null = null;
  if ('items' in schema) {
    if (Array.isArray(schema.items)) throw new Unsupported(`${at}/items: a list of schemas`);
    items = compileNode(schema.items, `${at}/items`);
  }

  // ajv checks a keyword only on data of the keyword's type, and orders a lone type's error after
  // keywords of other types. Keep clear of such schemas: each keyword must fit an allowed type.
  if (minLength > 0 && (types & T_STRING) === 0) throw new Unsupported(`${at}: minLength without the type string`);
  if ('properties' in schema && (types & T_OBJECT) === 0) throw new Unsupported(`${at}: properties without the type object`);
  if ('items' in schema && (types & T_ARRAY) === 0) throw new Unsupported(`${at}: items without the type array`);

  if (types === T_ANY && minLength === 0 && properties === null && items === null) return null;
  return {
    types,
    typeMessage,
    minLength,
    minLengthMessage: `must NOT have fewer than ${minLength} characters`,
    properties,
    items,
  };
}
