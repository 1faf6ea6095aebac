/**
 * Checks a configuration file against schemas/config.schema.json (generated from schema/file.ts,
 * the file's one schema) and fills in its defaults.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { ConfigError } from '../errors.js';
import { ERROR_MESSAGE_KEYWORD, pathOf, problemOf } from './schema-errors.js';
import { readSchema } from './schema-file.js';
import type { FileConfig } from './schema/file.js';

export type { FeedFamily, FileConfig, RequestLogMode } from './schema/file.js';

let validator: ValidateFunction | undefined;
let schema: Record<string, unknown> | undefined;

/**
 * Validates a parsed file (`{}` for none) and fills in the defaults, in place. Throws the
 * ConfigError of the first problem, naming the file and the path inside it.
 */
export function parseFileConfig(value: Record<string, unknown>, file: string | undefined): FileConfig {
  schema ??= readSchema('config.schema.json');
  validator ??= new Ajv({ useDefaults: true, keywords: [ERROR_MESSAGE_KEYWORD] }).compile(schema);
  if (!validator(value)) {
    const err = validator.errors![0]!;
    throw new ConfigError(file, pathOf(err.instancePath), problemOf(err, schema));
  }
  return value as FileConfig;
}
