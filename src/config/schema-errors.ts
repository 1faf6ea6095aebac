/**
 * Wording of a failed configuration check, from the ajv error and the schema itself. A schema may
 * carry its own text in `errorMessage`: one string for any failure of that schema, or one per
 * keyword (`{ pattern: '…' }`); `{value}` in it stands for the value as the operator gave it.
 */
import type { ErrorObject, KeywordDefinition } from 'ajv';

export type ErrorMessage = string | Readonly<Record<string, string>>;

/** Declares `errorMessage` to ajv, so that strict mode accepts it (it validates nothing). */
export const ERROR_MESSAGE_KEYWORD: KeywordDefinition = { keyword: 'errorMessage', schemaType: ['string', 'object'] };

/** `/marketplaces/0/plans/ULTRA` → `marketplaces[0].plans.ULTRA` (the path an operator reads). */
export function pathOf(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((p) => (/^\d+$/.test(p) ? `[${p}]` : `.${p.replaceAll('~1', '/').replaceAll('~0', '~')}`))
    .join('')
    .replace(/^\./, '');
}

/** The schema holding the keyword that failed: `schemaPath` (`#/properties/PORT/maximum`) without its last step. */
function failedSchema(root: object, schemaPath: string): { errorMessage?: ErrorMessage } | undefined {
  let node: unknown = root;
  for (const step of schemaPath.split('/').slice(1, -1)) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[step.replaceAll('~1', '/').replaceAll('~0', '~')];
  }
  return node !== null && typeof node === 'object' ? node : undefined;
}

/** What is wrong, in the words of `schema` (the one validated against) when it has some. */
export function problemOf(err: ErrorObject, schema: object, given = ''): string {
  const own = failedSchema(schema, err.schemaPath)?.errorMessage;
  const text = typeof own === 'string' ? own : own?.[err.keyword];
  if (text !== undefined) return text.replaceAll('{value}', given);
  if (err.keyword === 'additionalProperties') return `unknown setting "${String(err.params.additionalProperty)}"`;
  if (err.keyword === 'enum') return `${err.message}: ${JSON.stringify(err.params.allowedValues)}`;
  return err.message ?? err.keyword;
}
