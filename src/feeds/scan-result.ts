/** What one pass over a document reports (scan.ts), shared by the readers that use it. */

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
  /** Valid JSON, but not I-JSON (ijson.ts): the first violation. */
  | { readonly kind: 'not_i_json'; readonly detail: string }
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

/** Scan `buf` from `from` (its first byte that is not white space) to the end, with a plan (null: syntax only). */
export type DocumentScanner = (buf: Buffer, from: number) => ScanResult;
