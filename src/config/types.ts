/**
 * The configuration as the rest of the program gets it: names in camelCase, durations in
 * milliseconds, folders resolved, secrets looked up. Built by build.ts from the two schemas
 * (schema/env.ts, schema/file.ts), which hold the names, defaults and checks.
 */
import type { ConfigError } from '../errors.js';
import type { FeedFamily, FileConfig, RequestLogMode } from './file-config.js';

export type { FeedFamily, RequestLogMode };
export type FeedKind = keyof FileConfig['stale_after'];

export interface Bookmaker {
  /** Company key, used in filenames. */
  readonly key: string;
  /** Public name; its lowercase form is accepted in a document's `bookmaker` field. */
  readonly name: string;
  readonly feeds: FeedFamily;
}

export interface Rate {
  readonly max: number;
  readonly perMs: number;
}

/** The longest conflate window of a stream (GET /v1/stream?conflate=, a plan's `conflate`), ms. */
export const MAX_CONFLATE_MS = 60_000;

export interface Plan {
  readonly name: string;
  readonly allow: readonly string[];
  readonly rate: Rate | undefined;
  /** PUTs per window of its publisher keys; undefined: publish.rate. */
  readonly publishRate?: Rate | undefined;
  /** Open /v1/stream connections per key, on all readers together; undefined: changes.streamsPerKey. */
  readonly streams: number | undefined;
  /** How far back its keys may read older versions (ms); undefined: no history. */
  readonly historyMs?: number | undefined;
  /** The least conflate window of its keys' streams (ms); undefined: none. */
  readonly conflateMs?: number | undefined;
  /** PUT bodies of one of its publisher keys received at once per reader; undefined: publish.uploadsPerKey. */
  readonly uploads?: number | undefined;
}

export interface Marketplace {
  readonly name: string;
  readonly secretHeader: string;
  /**
   * The proxy secret. Undefined only when loaded with `optionalSecrets` and its `secret_env` is
   * not set; `missingSecret` then holds the error a reader must raise.
   */
  readonly secret: string | undefined;
  readonly missingSecret?: ConfigError;
  readonly userHeader: string;
  readonly planHeader: string;
  readonly plans: Readonly<Record<string, string>>;
}

export interface Config {
  readonly dataDir: string;
  readonly inboxDir: string;
  readonly rejectedDir: string;
  readonly storeUrl: string;
  readonly redis: {
    readonly url: string;
    /** REDIS_URL was set: never fall back to a private redis-server. */
    readonly explicit: boolean;
    readonly prefix: string;
    /** A publication is acknowledged once this many replicas have its commit (WAIT); 0: none. */
    readonly waitReplicas: number;
    /** The longest a commit waits for them. */
    readonly waitTimeoutMs: number;
  };
  readonly http: {
    readonly host: string;
    readonly port: number;
    readonly tls: { readonly certFile: string; readonly keyFile: string } | undefined;
  };
  /** METRICS_PORT: a separate /metrics listener (on HOST), for processes without the reader. */
  readonly metricsPort: number | undefined;
  readonly s3: {
    readonly endpoint: string | undefined;
    readonly forcePathStyle: boolean;
    readonly region: string | undefined;
  };
  readonly configFile: string | undefined;
  readonly adminToken: string | undefined;
  readonly logLevel: string;
  readonly bookmakers: readonly Bookmaker[];
  readonly sports: readonly string[];
  readonly plans: Readonly<Record<string, Plan>>;
  readonly marketplaces: readonly Marketplace[];
  readonly limits: {
    readonly maxFileBytes: number;
    readonly futureSkewMs: number;
    /** Deepest nesting of arrays and objects a document may have. */
    readonly maxDepth: number;
  };
  readonly staleAfterMs: Readonly<Record<FeedKind, number>>;
  readonly ingest: {
    readonly concurrency: number;
    /** How long a file written in place must stay unchanged before it is read. */
    readonly settleMs: number;
    readonly settleMaxMs: number;
    /** Period of the full inbox rescan (inotify drops events on overflow). */
    readonly rescanMs: number;
    /**
     * 0: the kernel reports drops (inotify through fs.watch). Otherwise poll the inbox at this
     * period (chokidar's polling mode), for folders whose writes raise no kernel event: NFS or
     * SMB shares written from other machines, some container bind mounts.
     */
    readonly pollMs: number;
    readonly keepVersions: number;
    readonly shutdownTimeoutMs: number;
    /** BullMQ lock: how soon a job of a killed worker is taken up again. */
    readonly lockDurationMs: number;
    /**
     * Versions up to this size are carried to readers in other processes ahead of their
     * announcement (no store read back); 0 carries none. Unset in the file: 256 KiB on S3, 0 on a
     * filesystem store (config/build.ts). See src/ingest/publish/carry.ts.
     */
    readonly carryMaxBytes: number;
    /** Carried bytes per second, per worker process. */
    readonly carryBytesPerSecond: number;
    /**
     * Drops and store objects up to this size are read and written with synchronous calls, only
     * the fsyncs on the thread pool; 0: every file call on the thread pool (an inbox or store on a
     * network filesystem). See src/sync-io.ts.
     */
    readonly syncIoMaxBytes: number;
    /** Threads per worker that validate and hash drops of 64 KiB or more; undefined: as the machine and its load suggest (checker.ts, core-contention.ts). */
    readonly validateThreads: number | undefined;
    /** Rejected drops older than this are removed from REJECTED_DIR by the workers; 0: never. */
    readonly rejectedRetentionMs: number;
    /** Past this many bytes in REJECTED_DIR the oldest rejected drops are removed; 0: no bound. */
    readonly rejectedMaxBytes: number;
  };
  readonly reader: {
    readonly refreshMs: number;
    readonly trustProxy: boolean | string | number;
    readonly authFailures: Rate;
    /**
     * The per-request log line: `all` (one per request), `errors` (only responses of 400 and up),
     * `off` (none; failed requests are still logged as errors). See src/reader/request-log.ts.
     */
    readonly requestLog: RequestLogMode;
    /**
     * Take plain GET/HEAD requests of /v1/files and /v1/data on Node's request event, before
     * Fastify (src/reader/data/front-door.ts); off: every request goes through Fastify's routes.
     */
    readonly hotPath: boolean;
  };
  /** Publishing over HTTPS: PUT /v1/data/{filename} on the readers (src/reader/publishing/publish-route.ts). */
  readonly publish: {
    readonly http: boolean;
    /** PUTs per window of a publisher key whose plan has no publish_rate. */
    readonly rate: Rate;
    /** Longest time a PUT's body may take to arrive. */
    readonly uploadTimeoutMs: number;
    /** Longest wait for Redis to queue a PUT's job (and, for a dry run, to read the published version); then 503, nothing kept. */
    readonly queueTimeoutMs: number;
    /** Longest wait for a worker to settle a PUT's job; then 504 (the job stays queued). */
    readonly settleTimeoutMs: number;
    /** PUT bodies received at once per reader process. */
    readonly maxUploads: number;
    /** PUT bodies of one publisher key received at once per reader process, unless its plan says `uploads`. */
    readonly uploadsPerKey: number;
    /** Staged uploads older than this with no job are removed (src/ingest/http/staged.ts). */
    readonly stagedMaxAgeMs: number;
  };
  /** The change log (a Redis stream written with every published change) and its consumers. */
  readonly changes: {
    readonly retentionMs: number;
    readonly maxEntries: number;
    /** Longest long-poll wait of /v1/changes. */
    readonly maxWaitMs: number;
    readonly heartbeatMs: number;
    readonly streamsPerKey: number;
    /** How long a stream's slot outlives a reader that stopped without releasing it. */
    readonly streamLeaseMs: number;
    /** Unread bytes after which a stream client is dropped. */
    readonly maxBufferedBytes: number;
  };
  /** Every published version kept for a while (GET /v1/history). */
  readonly history: {
    readonly retentionMs: number;
    readonly maxVersions: number;
  };
  /** Deltas (RFC 3229) on GET /v1/data: built off the serving loop, bounded (src/reader/deltas/). */
  readonly deltas: {
    /** Files larger than this get no deltas. */
    readonly maxBytes: number;
    /** Longest wait of a request for a patch being built. */
    readonly maxWaitMs: number;
    readonly threads: number;
    /** How long after a file's last one-version-behind request its next patches are built as versions arrive; 0: never. */
    readonly prebuildForMs: number;
  };
}
