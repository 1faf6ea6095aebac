/**
 * The environment variables the service reads, checked against schemas/env.schema.json (generated
 * from schema/env.ts, which gives their names, defaults, checks, type and error wording);
 * env-schema (ajv with defaults and type coercion) applies it. An empty variable counts as unset
 * (`PORT=` keeps 8080, `REDIS_URL=` is not an explicit Redis). Only the marketplaces'
 * `secret_env` variables are read outside this schema (their names come from the config file).
 */
import type { Ajv, ErrorObject } from 'ajv';
import envSchema from 'env-schema';
import { ConfigError } from '../errors.js';
import { ERROR_MESSAGE_KEYWORD, problemOf } from './schema-errors.js';
import { readSchema } from './schema-file.js';
import type { EnvConfig } from './schema/env.js';

export type { EnvConfig } from './schema/env.js';
export type Env = Readonly<Record<string, string | undefined>>;

// One schema object and one ajv instance for every load, so the schema is compiled once. The
// instance is the one env-schema makes on the first load (its options: coercion, defaults), with
// errorMessage declared. env-schema sets additionalProperties: false (other variables are dropped).
const schema = readSchema('env.schema.json');
let ajv: Ajv | undefined;

/** The names of the variables the schema reads. */
export const ENV_NAMES: readonly string[] = Object.keys(schema.properties as object);

/** Parses, checks and defaults the variables of `env`. Throws a ConfigError naming the variable. */
export function parseEnv(env: Env): EnvConfig {
  const given: Record<string, string> = {};
  for (const name of ENV_NAMES) {
    const value = env[name];
    if (value !== undefined && value !== '') given[name] = value;
  }
  try {
    return envSchema<EnvConfig>({
      schema,
      data: given,
      env: false,
      ajv: ajv ?? { customOptions: (fresh) => (ajv = fresh.addKeyword(ERROR_MESSAGE_KEYWORD)) },
    });
  } catch (err) {
    const first = (err as { errors?: ErrorObject[] }).errors?.[0];
    if (first === undefined) throw err;
    const name = first.keyword === 'dependencies' ? String(first.params.missingProperty) : first.instancePath.slice(1);
    throw new ConfigError(undefined, name, problemOf(first, schema, given[name]));
  }
}
