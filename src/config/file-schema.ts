/**
 * The YAML configuration file: its one schema gives the defaults (`default`, filled in by ajv),
 * the validation, the TypeScript type (`FileConfig`) and the wording of errors (`errorMessage`,
 * see schema-errors.ts). schemas/config.schema.json is generated from it for editors and users
 * (`npm run schema:config`; a test fails when the committed copy is stale).
 *
 * Every part is optional. Lists and maps at the top level replace the default whole; the sections
 * (limits, stale_after, ingest, reader, publish, redis, changes) have a default of `{}` and defaults per field, so a file
 * that names one field of a section keeps the others.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import Type, { type Static, type TSchema } from 'typebox';
import { ConfigError } from '../errors.js';
import { DURATION_PATTERN } from '../duration.js';
import { SYNC_IO_MAX_BYTES } from '../sync-io.js';
import { ERROR_MESSAGE_KEYWORD, pathOf, problemOf } from './schema-errors.js';

const duration = (options: { default?: string; description?: string } = {}) =>
  Type.String({ pattern: DURATION_PATTERN, errorMessage: { pattern: 'must be a duration such as 500ms, 30s, 1m, 1h' }, ...options });
const slug = Type.String({ pattern: '^[a-z0-9]+(-[a-z0-9]+)*$', maxLength: 64 });
const header = Type.String({ pattern: '^[A-Za-z0-9-]+$' });
const closed = { additionalProperties: false } as const;
/** An object of any keys whose values all follow `value` (JSON Schema's additionalProperties). */
const mapOf = <V extends TSchema>(value: V, options: Record<string, unknown> = {}) =>
  Type.Unsafe<Record<string, Static<V>>>({ type: 'object', additionalProperties: value, ...options });

export const FeedFamilySchema = Type.Enum(['split', 'combined-live', 'livepre']);
export const RequestLogSchema = Type.Enum(['all', 'errors', 'off'], {
  default: 'all',
  description: 'per-request log lines: all, errors (status 400 and up), off',
});

const Rate = Type.Object({ max: Type.Integer({ minimum: 1 }), per: duration() }, closed);

const Bookmaker = Type.Object(
  {
    key: slug,
    name: Type.String({ minLength: 1, maxLength: 100 }),
    feeds: FeedFamilySchema,
  },
  closed,
);

const Plan = Type.Object(
  {
    allow: Type.Array(Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9_.*-]+$' })),
    rate: Type.Optional(Rate),
    publish_rate: Type.Optional(Rate),
    streams: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 100_000,
        description: 'open /v1/stream connections per key, on all readers together; default: changes.streams_per_key',
      }),
    ),
    history: Type.Optional(duration({ description: 'how far back its keys may read older versions (GET /v1/history); absent: no history' })),
    conflate: Type.Optional(
      duration({ description: "the least conflate window of its keys' streams (GET /v1/stream?conflate=): a lower or absent conflate gets this one" }),
    ),
    uploads: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 10_000,
        description: 'PUT bodies of one publisher key received at once per reader; default: publish.uploads_per_key',
      }),
    ),
  },
  closed,
);

const Marketplace = Type.Object(
  {
    name: slug,
    secret_header: header,
    secret: Type.Optional(Type.String({ minLength: 8 })),
    secret_env: Type.Optional(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' })),
    user_header: header,
    plan_header: header,
    plans: mapOf(Type.String()),
  },
  {
    ...closed,
    // Exactly one of secret and secret_env.
    oneOf: [
      { required: ['secret'], errorMessage: 'set secret or secret_env (the name of an environment variable holding the secret)' },
      { required: ['secret_env'], errorMessage: 'set secret or secret_env (the name of an environment variable holding the secret)' },
    ],
    errorMessage: { oneOf: 'set secret or secret_env, not both' },
  },
);

const section = { ...closed, default: {} } as const;

export const FileSchema = Type.Object(
  {
    bookmakers: Type.Array(Bookmaker, {
      minItems: 1,
      default: [
        { key: 'northwind', name: 'Northwind', feeds: 'split' },
        { key: 'bluewater', name: 'Bluewater', feeds: 'split' },
        { key: 'redstone', name: 'Redstone', feeds: 'split' },
        { key: 'goldcrest', name: 'Goldcrest', feeds: 'split' },
        { key: 'hillview', name: 'StarBet', feeds: 'split' },
        { key: 'silverline', name: 'Silverline', feeds: 'combined-live' },
        { key: 'oddsport', name: 'OddSport', feeds: 'livepre' },
      ],
    }),
    sports: Type.Array(slug, { minItems: 1, uniqueItems: true, default: ['soccer', 'basketball', 'tennis'] }),
    plans: mapOf(Plan, {
      minProperties: 1,
      propertyNames: { pattern: '^[A-Za-z0-9_-]{1,64}$' },
      default: {
        free: { allow: ['site_pregame_*'], rate: { max: 30, per: '1m' } },
        pro: { allow: ['*'], rate: { max: 600, per: '1m' }, history: '24h' },
      },
    }),
    marketplaces: Type.Array(Marketplace, { default: [] }),
    limits: Type.Object(
      {
        max_file_bytes: Type.Integer({ minimum: 1, default: 52_428_800, description: 'larger drops are rejected as too_large without being read' }),
        future_skew: duration({ default: '5m', description: 'how far generated_at may be ahead of the server clock' }),
        max_depth: Type.Integer({ minimum: 2, maximum: 10_000, default: 64, description: 'deepest nesting of arrays and objects in a document' }),
      },
      section,
    ),
    stale_after: Type.Object(
      { live: duration({ default: '30s' }), pregame: duration({ default: '15m' }), livepre: duration({ default: '30s' }) },
      { ...section, description: '`status` marks feeds older than this stale' },
    ),
    ingest: Type.Object(
      {
        concurrency: Type.Integer({ minimum: 1, maximum: 256, default: 4, description: 'jobs at once per worker process' }),
        settle: duration({ default: '2s', description: 'a drop that does not parse (a file still being written) is rejected only once unchanged this long' }),
        settle_max: duration({
          default: '1m',
          description: 'longest wait for a file still being written; and how long a rejected one is watched for late writes (they make it a new drop)',
        }),
        rescan: duration({ default: '5s', description: 'full inbox rescan (inotify drops events on overflow)' }),
        poll: duration({ default: '0s', description: '0: kernel events; otherwise poll the inbox at this period (NFS/SMB shares, bind mounts)' }),
        keep_versions: Type.Integer({ minimum: 1, maximum: 1000, default: 10, description: 'versions kept per filename in the store' }),
        shutdown_timeout: duration({ default: '10s', description: 'how long SIGTERM waits for in-flight jobs' }),
        lock_duration: duration({ default: '15s', description: "a killed worker's job is taken up again after this" }),
        carry_max_bytes: Type.Integer({
          minimum: 0,
          maximum: 16_777_216,
          default: 262_144,
          description: 'versions up to this size reach readers in other processes ahead of their announcement; 0: never',
        }),
        carry_bytes_per_second: Type.Integer({
          minimum: 0,
          maximum: 1_073_741_824,
          default: 16_777_216,
          description: 'cap on carried bytes per worker process',
        }),
        rejected_retention: Type.String({
          pattern: '^(off|0|[0-9]+(\\.[0-9]+)?(ms|s|m|h|d))$',
          errorMessage: { pattern: 'must be a duration such as 30d, or off' },
          default: '30d',
          description: 'rejected drops older than this are removed from REJECTED_DIR (by the workers, hourly); off or 0: kept for ever',
        }),
        sync_io_max_bytes: Type.Integer({
          minimum: 0,
          maximum: 16_777_216,
          default: SYNC_IO_MAX_BYTES,
          description: 'drops and store objects up to this size are read and written with synchronous calls; 0: all on the thread pool (network filesystems)',
        }),
      },
      section,
    ),
    reader: Type.Object(
      {
        refresh: duration({ default: '30s', description: 'full catalog re-read (pub/sub announces every change at once)' }),
        trust_proxy: Type.Unsafe<boolean | string | number>({
          oneOf: [{ type: 'boolean' }, { type: 'string' }, { type: 'integer', minimum: 0 }],
          default: false,
          description: 'true, a number of hops or CIDRs: whether X-Forwarded-For names the client',
        }),
        auth_failures: Type.Object(Rate.properties, {
          ...closed,
          default: { max: 20, per: '1m' },
          description: 'failed authentications allowed per client address',
        }),
        request_log: RequestLogSchema,
        hot_path: Type.Boolean({ default: true, description: 'answer the common /v1 GET before Fastify; false: every request through Fastify' }),
      },
      section,
    ),
    publish: Type.Object(
      {
        http: Type.Boolean({ default: true, description: 'readers take PUT /v1/data/{filename} from publisher keys; false: reads only' }),
        rate: Type.Object(Rate.properties, {
          ...closed,
          default: { max: 1200, per: '1m' },
          description: 'PUTs allowed per publisher key, unless its plan says `publish_rate`',
        }),
        upload_timeout: duration({ default: '20s', description: 'a PUT whose body has not fully arrived by then is refused (408) and leaves nothing behind' }),
        settle_timeout: duration({
          default: '30s',
          description: 'a PUT whose job no worker has settled by then gets 504 (it stays queued and is settled later)',
        }),
        max_uploads: Type.Integer({
          minimum: 1,
          maximum: 10_000,
          default: 16,
          description: 'PUT bodies received at once per reader process (each held in memory up to limits.max_file_bytes); more: 503',
        }),
        uploads_per_key: Type.Integer({
          minimum: 1,
          maximum: 10_000,
          default: 4,
          description: 'PUT bodies of one publisher key received at once per reader process, unless its plan says `uploads`; more: 429',
        }),
        staged_max_age: duration({ default: '10m', description: 'staged uploads with no job after this long are removed by the workers' }),
      },
      section,
    ),
    redis: Type.Object(
      {
        url: Type.Optional(
          Type.String({
            minLength: 1,
            description:
              'Redis (REDIS_URL, when set, wins): redis://host:port[/db], rediss://…, or redis+sentinel://host:port[,host:port…]/<master-name>[?db=N]',
          }),
        ),
        wait_replicas: Type.Integer({
          minimum: 0,
          maximum: 16,
          default: 0,
          description: 'a publication is acknowledged only once this many replicas have it (WAIT after the catalog commit); 0: no wait (a single Redis)',
        }),
        wait_timeout: duration({ default: '2s', description: 'longest a commit waits for wait_replicas; fewer by then: the drop is retried' }),
      },
      section,
    ),
    changes: Type.Object(
      {
        retention: duration({ default: '24h', description: 'the change log keeps entries at least this long (and at most max_entries)' }),
        max_entries: Type.Integer({
          minimum: 100,
          maximum: 100_000_000,
          default: 1_000_000,
          description: 'the change log is trimmed to about this many entries',
        }),
        max_wait: duration({ default: '60s', description: 'longest wait a long-poll of /v1/changes may ask for' }),
        heartbeat: duration({ default: '15s', description: 'a comment line on every open /v1/stream this often' }),
        streams_per_key: Type.Integer({
          minimum: 0,
          maximum: 100_000,
          default: 10,
          description: 'open /v1/stream connections per key, on all readers together, unless the plan says `streams`',
        }),
        stream_lease: duration({
          default: '60s',
          description: "how long a stream's slot in its key's count outlives a reader that stopped without closing it",
        }),
        max_buffered_bytes: Type.Integer({
          minimum: 1024,
          maximum: 1_073_741_824,
          default: 1_048_576,
          description: 'a stream client that lets this much wait unread is dropped (it resumes with Last-Event-ID)',
        }),
      },
      section,
    ),
    history: Type.Object(
      {
        retention: duration({ default: '7d', description: 'every published version is kept at least this long (GET /v1/history), then removed' }),
        max_versions: Type.Integer({
          minimum: 1,
          maximum: 10_000_000,
          default: 20_000,
          description: 'at most this many versions kept per filename, whatever their age',
        }),
      },
      section,
    ),
    deltas: Type.Object(
      {
        max_bytes: Type.Integer({
          minimum: 0,
          maximum: 1_073_741_824,
          default: 8_388_608,
          description: 'files larger than this get no deltas (A-IM is ignored: 200 or 304 as without it); 0: no deltas',
        }),
        max_wait: duration({
          default: '1s',
          description: 'longest a request waits for a patch being built; then it gets the whole file (the patch is kept for the next)',
        }),
        threads: Type.Integer({ minimum: 1, maximum: 64, default: 1, description: 'worker threads per reader that build patches and digests' }),
      },
      section,
    ),
  },
  {
    ...closed,
    title: 'oddsfiles configuration file (ODDSFILES_CONFIG)',
    description:
      'Every part is optional: what the file leaves out keeps its built-in default. Lists and maps at the top level (bookmakers, sports, plans, marketplaces) replace the default whole; limits, stale_after, ingest, reader, publish, redis, changes, history and deltas are merged field by field.',
  },
);

/** The file as the program sees it: every default filled in. */
export type FileConfig = Static<typeof FileSchema>;
export type FeedFamily = Static<typeof FeedFamilySchema>;
export type RequestLogMode = Static<typeof RequestLogSchema>;

/**
 * The schema as JSON: what a file may leave out is not `required` (ajv fills in its default
 * before checking `required`, but editors validating a file by this schema would not).
 */
export function fileJsonSchema(): Record<string, unknown> {
  const optionalDefaults = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(optionalDefaults);
    if (node === null || typeof node !== 'object') return node;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) out[k] = k === 'default' ? v : optionalDefaults(v);
    const props = out.properties as Record<string, { default?: unknown }> | undefined;
    if (Array.isArray(out.required) && props) {
      const required = (out.required as string[]).filter((name) => props[name]?.default === undefined);
      if (required.length > 0) out.required = required;
      else delete out.required;
    }
    return out;
  };
  const { title, description, ...rest } = optionalDefaults(FileSchema) as Record<string, unknown>;
  return { $schema: 'http://json-schema.org/draft-07/schema#', $id: 'https://oddsfiles.dev/schemas/config.schema.json', title, description, ...rest };
}

let validator: ValidateFunction | undefined;
let validated: Record<string, unknown> | undefined;

/**
 * Validates a parsed file (`{}` for none) and fills in the defaults, in place. Throws the
 * ConfigError of the first problem, naming the file and the path inside it.
 */
export function parseFileConfig(value: Record<string, unknown>, file: string | undefined): FileConfig {
  validated ??= fileJsonSchema();
  validator ??= new Ajv({ useDefaults: true, keywords: [ERROR_MESSAGE_KEYWORD] }).compile(validated);
  if (!validator(value)) {
    const err = validator.errors![0]!;
    throw new ConfigError(file, pathOf(err.instancePath), problemOf(err, validated));
  }
  return value as FileConfig;
}
