/**
 * Writes schemas/config.schema.json (for editors, operators and the service) and
 * schemas/env.schema.json (for the service) from the schemas in src/config/schema/:
 * `npm run schema:config`. test/config/schema.test.ts fails when a committed file is not what
 * this writes.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { envJsonSchema } from '../../src/config/schema/env.js';
import { fileJsonSchema } from '../../src/config/schema/file.js';
import { schemaPath } from '../../src/paths.js';

export const CONFIG_SCHEMA_FILE = schemaPath('config.schema.json');
export const ENV_SCHEMA_FILE = schemaPath('env.schema.json');

export function configSchemaText(): string {
  return `${JSON.stringify(fileJsonSchema(), null, 2)}\n`;
}

export function envSchemaText(): string {
  return `${JSON.stringify(envJsonSchema(), null, 2)}\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(CONFIG_SCHEMA_FILE, configSchemaText());
  writeFileSync(ENV_SCHEMA_FILE, envSchemaText());
  console.log(`wrote ${CONFIG_SCHEMA_FILE} and ${ENV_SCHEMA_FILE}`);
}
