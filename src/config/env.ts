/**
 * The environment variables the service reads: one schema gives their names, defaults, checks,
 * TypeScript type and error wording; env-schema (ajv with defaults and type coercion) applies it.
 * An empty variable counts as unset (`PORT=` keeps 8080, `REDIS_URL=` is not an explicit Redis).
 * Only the marketplaces' `secret_env` variables are read outside this schema (their names come
 * from the config file).
 */
import type { Ajv, ErrorObject } from 'ajv';
import envSchema from 'env-schema';
import Type, { type Static } from 'typebox';
import { ConfigError } from '../errors.js';
import { ERROR_MESSAGE_KEYWORD, problemOf } from './schema-errors.js';

export type Env = Readonly<Record<string, string | undefined>>;

const port = (options: { default?: number; description: string }) =>
  Type.Integer({ minimum: 0, maximum: 65535, errorMessage: 'must be a whole number from 0 to 65535, not "{value}"', ...options });
const text = (description: string) => Type.Optional(Type.String({ description }));

export const EnvSchema = Type.Object(
  {
    DATA_DIR: Type.String({ default: './var', description: 'root of the embedded defaults' }),
    INBOX_DIR: text('the drop folder [$DATA_DIR/inbox]'),
    REJECTED_DIR: text('rejected drops, each with its reason [$DATA_DIR/rejected]'),
    STORE_URL: text('the published store: file:///abs/dir or s3://bucket/prefix [file://$DATA_DIR/store]'),
    S3_ENDPOINT: text('S3 endpoint (the AWS SDK default when unset)'),
    S3_FORCE_PATH_STYLE: text('1, true or yes (any case): path-style S3 URLs'),
    AWS_REGION: text('S3 region'),
    AWS_DEFAULT_REGION: text('S3 region when AWS_REGION is unset'),
    REDIS_URL: Type.String({ default: 'redis://127.0.0.1:6379', description: 'Redis; when set, never replaced by a private server' }),
    REDIS_PREFIX: Type.String({
      default: 'oddsfiles',
      pattern: '^[A-Za-z0-9_.:-]{1,64}$',
      errorMessage: 'use letters, digits and _ . : - only (at most 64)',
      description: 'prefix of every Redis key and queue',
    }),
    HOST: Type.String({ default: '127.0.0.1', description: 'where the reader listens' }),
    PORT: port({ default: 8080, description: 'where the reader listens (0: any free port)' }),
    METRICS_PORT: Type.Optional(port({ description: 'a /metrics listener on HOST for processes without a reader' })),
    TLS_CERT_FILE: text('with TLS_KEY_FILE: the reader serves HTTPS only'),
    TLS_KEY_FILE: text('with TLS_CERT_FILE: the reader serves HTTPS only'),
    ODDSFILES_CONFIG: text('the YAML config file [./oddsfiles.yaml if present]'),
    ADMIN_TOKEN: text('bearer token for /admin/* and /metrics; unset: loopback requests only'),
    LOG_LEVEL: Type.Enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
      default: 'info',
      errorMessage: 'unknown level "{value}"',
    }),
  },
  {
    dependencies: { TLS_CERT_FILE: ['TLS_KEY_FILE'], TLS_KEY_FILE: ['TLS_CERT_FILE'] },
    errorMessage: { dependencies: 'set both TLS_CERT_FILE and TLS_KEY_FILE, or neither' },
  },
);

export type EnvConfig = Static<typeof EnvSchema>;

/** The names of the variables the schema reads. */
export const ENV_NAMES: readonly string[] = Object.keys(EnvSchema.properties);

// One schema object and one ajv instance for every load, so the schema is compiled once. The
// instance is the one env-schema makes on the first load (its options: coercion, defaults), with
// errorMessage declared. additionalProperties: what env-schema sets (other variables are dropped).
const schema = { ...EnvSchema, additionalProperties: false };
let ajv: Ajv | undefined;

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
    throw new ConfigError(undefined, name, problemOf(first, EnvSchema, given[name]));
  }
}
