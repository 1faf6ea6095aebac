/**
 * The YAML configuration file's one schema: the defaults (`default`, filled in by ajv), the
 * validation, the TypeScript type (`FileConfig`) and the wording of errors (`errorMessage`, see
 * ../schema-errors.ts). schemas/config.schema.json is generated from it (`npm run schema:config`;
 * a test fails when the committed copy is stale): editors and users validate a file by it, and
 * the service checks files against it (../file-config.ts), so no process loads typebox.
 *
 * Every part is optional. Lists and maps at the top level replace the default whole; the sections
 * (sections.ts) have a default of `{}` and defaults per field, so a file that names one field of
 * a section keeps the others.
 */
import Type, { type Static } from 'typebox';
import { closed, duration, header, mapOf, Rate, slug } from './parts.js';
import {
  ChangesSection,
  DeltasSection,
  HistorySection,
  IngestSection,
  LimitsSection,
  PublishSection,
  ReaderSection,
  RedisSection,
  type RequestLogSchema,
  StaleAfterSection,
} from './sections.js';

export const FeedFamilySchema = Type.Enum(['split', 'combined-live', 'livepre']);

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
    limits: LimitsSection,
    stale_after: StaleAfterSection,
    ingest: IngestSection,
    reader: ReaderSection,
    publish: PublishSection,
    redis: RedisSection,
    changes: ChangesSection,
    history: HistorySection,
    deltas: DeltasSection,
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
