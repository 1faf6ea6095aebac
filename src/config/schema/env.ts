/**
 * The environment variables the service reads, as one schema: their names, defaults, checks,
 * TypeScript type (`EnvConfig`) and error wording. schemas/env.schema.json is generated from it
 * (`npm run schema:config`; a test fails when the committed copy is stale), and the service
 * checks the environment against that file (../env.ts), so no process loads typebox.
 */
import Type, { type Static } from 'typebox';

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

/** The schema as JSON, as the service applies it. */
export function envJsonSchema(): Record<string, unknown> {
  return { $schema: 'http://json-schema.org/draft-07/schema#', ...EnvSchema };
}
