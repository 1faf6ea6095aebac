/**
 * From the checked environment and file to the runtime Config: durations in milliseconds, folders
 * resolved against the working folder, marketplace secrets looked up, and the checks that span
 * several values (duplicate bookmaker keys, marketplace plans that must exist, STORE_URL's form).
 */
import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ConfigError } from '../errors.js';
import { sentinelOptions } from '../redis/sentinel-url.js';
import { parseDuration } from '../duration.js';
import type { Env, EnvConfig } from './env.js';
import type { FileConfig } from './file-config.js';
import { MAX_CONFLATE_MS, type Config, type Marketplace, type Plan } from './types.js';

export interface BuildInput {
  /** The checked variables of env.ts, defaults filled in. */
  vars: EnvConfig;
  /** The whole environment: marketplaces name their secret's variable in the file. */
  env: Env;
  cwd: string;
  /** The checked file, defaults filled in. */
  file: FileConfig;
  configFile: string | undefined;
  optionalSecrets: boolean;
}

export function buildConfig({ vars, env, cwd, file: f, configFile, optionalSecrets }: BuildInput): Config {
  const where = (path: string, problem: string) => new ConfigError(configFile, path, problem);
  // The schema has checked every duration's form.
  const dur = (text: string) => parseDuration(text) as number;
  const dataDir = resolve(cwd, vars.DATA_DIR);
  const redisUrl = env.REDIS_URL ? vars.REDIS_URL : (f.redis.url ?? vars.REDIS_URL);
  // A Sentinel URL is checked here, so a mistyped one stops the start with its reason.
  sentinelOptions(redisUrl);

  const bookmakers = f.bookmakers.map((b) => ({ key: b.key, name: b.name, feeds: b.feeds }));
  const seen = new Set<string>();
  bookmakers.forEach((b, i) => {
    if (seen.has(b.key)) throw where(`bookmakers[${i}].key`, `duplicate bookmaker key "${b.key}"`);
    seen.add(b.key);
  });

  const plans: Record<string, Plan> = {};
  for (const [name, p] of Object.entries(f.plans)) {
    if (p.conflate !== undefined && dur(p.conflate) > MAX_CONFLATE_MS) throw where(`plans.${name}.conflate`, `must be at most ${MAX_CONFLATE_MS / 1000}s`);
    plans[name] = {
      name,
      allow: [...p.allow],
      rate: p.rate ? { max: p.rate.max, perMs: dur(p.rate.per) } : undefined,
      publishRate: p.publish_rate ? { max: p.publish_rate.max, perMs: dur(p.publish_rate.per) } : undefined,
      streams: p.streams,
      uploads: p.uploads,
      historyMs: p.history === undefined ? undefined : dur(p.history),
      conflateMs: p.conflate === undefined ? undefined : dur(p.conflate),
    };
  }

  const marketplaces = f.marketplaces.map((m, i): Marketplace => {
    let secret = m.secret;
    let missingSecret: ConfigError | undefined;
    if (secret === undefined) {
      secret = env[m.secret_env as string] || undefined;
      if (secret === undefined) {
        missingSecret = where(`marketplaces[${i}].secret_env`, `environment variable ${m.secret_env} is not set`);
        if (!optionalSecrets) throw missingSecret;
      }
    }
    for (const [theirs, ours] of Object.entries(m.plans)) {
      if (!plans[ours]) throw where(`marketplaces[${i}].plans.${theirs}`, `no plan named "${ours}"`);
    }
    return {
      name: m.name,
      secretHeader: m.secret_header.toLowerCase(),
      secret,
      ...(missingSecret ? { missingSecret } : {}),
      userHeader: m.user_header.toLowerCase(),
      planHeader: m.plan_header.toLowerCase(),
      plans: { ...m.plans },
    };
  });

  const { TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile } = vars;
  const storeUrl = normaliseStoreUrl(vars.STORE_URL ?? pathToFileURL(resolve(dataDir, 'store')).href, cwd);
  return {
    dataDir,
    inboxDir: resolve(cwd, vars.INBOX_DIR ?? resolve(dataDir, 'inbox')),
    rejectedDir: resolve(cwd, vars.REJECTED_DIR ?? resolve(dataDir, 'rejected')),
    storeUrl,
    redis: {
      url: redisUrl,
      explicit: Boolean(env.REDIS_URL) || f.redis.url !== undefined,
      prefix: vars.REDIS_PREFIX,
      waitReplicas: f.redis.wait_replicas,
      waitTimeoutMs: dur(f.redis.wait_timeout),
    },
    http: {
      host: vars.HOST,
      port: vars.PORT,
      // The schema requires both or neither.
      tls: certFile && keyFile ? { certFile: resolve(cwd, certFile), keyFile: resolve(cwd, keyFile) } : undefined,
    },
    metricsPort: vars.METRICS_PORT,
    s3: {
      endpoint: vars.S3_ENDPOINT,
      forcePathStyle: /^(1|true|yes)$/i.test(vars.S3_FORCE_PATH_STYLE ?? ''),
      region: vars.AWS_REGION ?? vars.AWS_DEFAULT_REGION,
    },
    configFile,
    adminToken: vars.ADMIN_TOKEN,
    logLevel: vars.LOG_LEVEL,
    bookmakers,
    sports: [...f.sports],
    plans,
    marketplaces,
    limits: {
      maxFileBytes: f.limits.max_file_bytes,
      futureSkewMs: dur(f.limits.future_skew),
      maxDepth: f.limits.max_depth,
    },
    staleAfterMs: {
      live: dur(f.stale_after.live),
      pregame: dur(f.stale_after.pregame),
      livepre: dur(f.stale_after.livepre),
    },
    ingest: {
      concurrency: f.ingest.concurrency,
      settleMs: dur(f.ingest.settle),
      settleMaxMs: dur(f.ingest.settle_max),
      rescanMs: dur(f.ingest.rescan),
      pollMs: dur(f.ingest.poll),
      keepVersions: f.ingest.keep_versions,
      shutdownTimeoutMs: dur(f.ingest.shutdown_timeout),
      lockDurationMs: dur(f.ingest.lock_duration),
      carryMaxBytes: f.ingest.carry_max_bytes ?? defaultCarryMaxBytes(storeUrl),
      carryBytesPerSecond: f.ingest.carry_bytes_per_second,
      syncIoMaxBytes: f.ingest.sync_io_max_bytes,
      validateThreads: f.ingest.validate_threads,
      rejectedRetentionMs: f.ingest.rejected_retention === 'off' || f.ingest.rejected_retention === '0' ? 0 : dur(f.ingest.rejected_retention),
      rejectedMaxBytes: f.ingest.rejected_max_bytes,
    },
    reader: {
      refreshMs: dur(f.reader.refresh),
      trustProxy: f.reader.trust_proxy,
      authFailures: { max: f.reader.auth_failures.max, perMs: dur(f.reader.auth_failures.per) },
      requestLog: f.reader.request_log,
      hotPath: f.reader.hot_path,
    },
    publish: {
      http: f.publish.http,
      rate: { max: f.publish.rate.max, perMs: dur(f.publish.rate.per) },
      uploadTimeoutMs: dur(f.publish.upload_timeout),
      queueTimeoutMs: dur(f.publish.queue_timeout),
      settleTimeoutMs: dur(f.publish.settle_timeout),
      maxUploads: f.publish.max_uploads,
      uploadsPerKey: f.publish.uploads_per_key,
      stagedMaxAgeMs: dur(f.publish.staged_max_age),
    },
    changes: {
      retentionMs: dur(f.changes.retention),
      maxEntries: f.changes.max_entries,
      maxWaitMs: dur(f.changes.max_wait),
      heartbeatMs: dur(f.changes.heartbeat),
      streamsPerKey: f.changes.streams_per_key,
      streamLeaseMs: dur(f.changes.stream_lease),
      maxBufferedBytes: f.changes.max_buffered_bytes,
    },
    history: { retentionMs: dur(f.history.retention), maxVersions: f.history.max_versions },
    deltas: { maxBytes: f.deltas.max_bytes, maxWaitMs: dur(f.deltas.max_wait), threads: f.deltas.threads, prebuildForMs: dur(f.deltas.prebuild_for) },
  };
}

/**
 * Carrying a version through Redis pays where a reader's store read is slow: one GET from S3 per
 * version and reader saved, and its latency. A filesystem store's read is a page-cache hit, while
 * carrying puts every version's bytes through Redis (which the queue and the commits also need)
 * and through each reader's connection: off there.
 */
function defaultCarryMaxBytes(storeUrl: string): number {
  return storeUrl.startsWith('s3://') ? 262_144 : 0;
}

/** STORE_URL as a canonical file:// URL or a checked s3:// one. */
function normaliseStoreUrl(url: string, cwd: string): string {
  if (url.startsWith('s3://')) {
    if (!/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?$/.test(url)) {
      throw new ConfigError(undefined, 'STORE_URL', `not a valid s3://bucket/prefix URL: "${url}"`);
    }
    return url;
  }
  if (url.startsWith('file://')) {
    try {
      return pathToFileURL(fileURLToPath(url)).href;
    } catch (err) {
      throw new ConfigError(undefined, 'STORE_URL', `use file:///absolute/dir: ${(err as Error).message}`);
    }
  }
  if (isAbsolute(url) || url.startsWith('.')) return pathToFileURL(resolve(cwd, url)).href;
  throw new ConfigError(undefined, 'STORE_URL', `use file:///absolute/dir or s3://bucket/prefix, not "${url}"`);
}
