/**
 * Writes schemas/config.schema.json (for editors and operators) from the config file's schema in
 * src/config/file-schema.ts: `npm run schema:config`. test/config.schema.test.ts fails when
 * the committed file is not what this writes.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { fileJsonSchema } from '../../src/config.js';
import { schemaPath } from '../../src/paths.js';

export const CONFIG_SCHEMA_FILE = schemaPath('config.schema.json');

export function configSchemaText(): string {
  return `${JSON.stringify(fileJsonSchema(), null, 2)}\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(CONFIG_SCHEMA_FILE, configSchemaText());
  console.log(`wrote ${CONFIG_SCHEMA_FILE}`);
}
