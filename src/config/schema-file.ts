import { readFileSync } from 'node:fs';
import { schemaPath } from '../paths.js';

/**
 * A JSON schema the package ships in schemas/ (generated from src/config/schema/ by
 * `npm run schema:config`), read once at load.
 */
export function readSchema(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(schemaPath(name), 'utf8')) as Record<string, unknown>;
}
