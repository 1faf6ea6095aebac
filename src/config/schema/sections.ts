/**
 * The sections of the configuration file (limits, stale_after, ingest, reader, publish, redis,
 * changes, history, deltas): each with a default per field (but ingest.carry_max_bytes, whose default
 * depends on the store), merged field by field with the file.
 */
import Type from 'typebox';
import { SYNC_IO_MAX_BYTES } from '../../sync-io.js';
import { closed, duration, Rate, section } from './parts.js';

export const RequestLogSchema = Type.Enum(['all', 'errors', 'off'], {
  default: 'all',
  description: 'per-request log lines: all, errors (status 400 and up), off',
});

export const LimitsSection = Type.Object(
  {
    max_file_bytes: Type.Integer({ minimum: 1, default: 52_428_800, description: 'larger drops are rejected as too_large without being read' }),
    future_skew: duration({ default: '5m', description: 'how far generated_at may be ahead of the server clock' }),
    max_depth: Type.Integer({ minimum: 2, maximum: 10_000, default: 64, description: 'deepest nesting of arrays and objects in a document' }),
  },
  section,
);

export const StaleAfterSection = Type.Object(
  { live: duration({ default: '30s' }), pregame: duration({ default: '15m' }), livepre: duration({ default: '30s' }) },
  { ...section, description: '`status` marks feeds older than this stale' },
);

export const IngestSection = Type.Object(
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
    // No default in the file: it depends on the store (config/build.ts).
    carry_max_bytes: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 16_777_216,
        description:
          'versions up to this size reach readers in other processes ahead of their announcement; 0: never; absent: 262144 on an S3 store, 0 on a filesystem store',
      }),
    ),
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
    rejected_max_bytes: Type.Integer({
      minimum: 0,
      maximum: Number.MAX_SAFE_INTEGER,
      default: 1_073_741_824,
      description: 'past this many bytes in REJECTED_DIR the oldest rejected drops are removed (by the worker that rejects); 0: no bound',
    }),
    sync_io_max_bytes: Type.Integer({
      minimum: 0,
      maximum: 16_777_216,
      default: SYNC_IO_MAX_BYTES,
      description: 'drops and store objects up to this size are read and written with synchronous calls; 0: all on the thread pool (network filesystems)',
    }),
    // No default in the file: it depends on the machine (ingest/publish/checker.ts).
    validate_threads: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 64,
        description:
          'threads per worker that validate and hash drops of 64 KiB or more, off its event loop; 0: on the event loop; absent: 1, but 0 for a worker that serves no readers on one core, and such a worker checks on its loop for 30 s whenever the thread waits for a core',
      }),
    ),
  },
  section,
);

export const ReaderSection = Type.Object(
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
);

export const PublishSection = Type.Object(
  {
    http: Type.Boolean({ default: true, description: 'readers take PUT /v1/data/{filename} from publisher keys; false: reads only' }),
    rate: Type.Object(Rate.properties, {
      ...closed,
      default: { max: 1200, per: '1m' },
      description: 'PUTs allowed per publisher key, unless its plan says `publish_rate`',
    }),
    upload_timeout: duration({ default: '20s', description: 'a PUT whose body has not fully arrived by then is refused (408) and leaves nothing behind' }),
    queue_timeout: duration({
      default: '5s',
      description: 'a PUT that cannot be queued by then (Redis away or not answering) gets 503 and nothing is kept',
    }),
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
);

export const RedisSection = Type.Object(
  {
    url: Type.Optional(
      Type.String({
        minLength: 1,
        description: 'Redis (REDIS_URL, when set, wins): redis://host:port[/db], rediss://…, or redis+sentinel://host:port[,host:port…]/<master-name>[?db=N]',
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
);

export const ChangesSection = Type.Object(
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
);

export const HistorySection = Type.Object(
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
);

export const DeltasSection = Type.Object(
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
    prebuild_for: duration({
      default: '10m',
      description:
        'a file asked for a patch from its previous version within this long has its next one built as each version arrives, before it is asked for (its previous version held in memory meanwhile); 0s: patches are built only when asked',
    }),
  },
  section,
);
