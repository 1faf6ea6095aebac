/**
 * docker-compose.yml (the production shape) and the image it builds, checked without a Docker
 * engine:
 * - the file is valid against the Compose Specification's JSON schema (the copy the `dclint`
 *   package ships; skipped when that package is not installed) and, when a Compose CLI is on the
 *   machine (`docker compose` or the standalone `docker-compose`), `config -q` accepts it;
 * - its structure is what docs/production.md describes: the services, their roles, health checks,
 *   volumes, Redis settings, and environment variables that the service reads (its environment
 *   schema, or the AWS SDK's credential chain) and that agree with each other (one REDIS_PREFIX, the bucket minio-init creates, MinIO's credentials);
 * - the Dockerfile runs as an unprivileged user that owns the folders the volumes mount on.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { DEFAULT_FILE_CONFIG, ENV_NAMES } from '../../src/config.js';
import { parseDuration } from '../../src/duration.js';
import { ROOT } from '../helpers/service.js';

const COMPOSE_FILE = join(ROOT, 'docker-compose.yml');
const composeText = readFileSync(COMPOSE_FILE, 'utf8');

type Json = Record<string, unknown>;
interface Service {
  image?: string;
  build?: unknown;
  command?: string[] | string;
  entrypoint?: string[] | string;
  environment?: Record<string, string | number | boolean | null>;
  volumes?: string[];
  ports?: string[];
  healthcheck?: { test?: string[] | string; interval?: string; start_period?: string; disable?: boolean };
  depends_on?: Record<string, { condition: string }>;
  stop_grace_period?: string;
  restart?: string;
}

/** `${VAR:-default}` / `${VAR}` / `$${...}` as Compose interpolates them, with an empty environment. */
function interpolate(value: unknown): unknown {
  if (typeof value === 'string') {
    return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}/g, (m, _name: string | undefined, def: string | undefined) =>
      m === '$$' ? '$' : (def ?? ''),
    );
  }
  if (Array.isArray(value)) return value.map(interpolate);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolate(v)]));
  return value;
}

// YAML 1.1 merge keys (`<<: *anchor`) are part of what Compose reads.
const raw = parse(composeText, { merge: true }) as Json;
const compose = interpolate(raw) as { services: Record<string, Service>; volumes?: Record<string, unknown> };
const services = compose.services;
const ODDSFILES_SERVICES = ['watcher', 'worker-1', 'worker-2', 'reader-1', 'reader-2'] as const;
const svc = (name: string) => services[name]!;
const env = (name: string) => Object.fromEntries(Object.entries(svc(name).environment ?? {}).map(([k, v]) => [k, String(v)]));
const commandOf = (name: string) => {
  const c = svc(name).command;
  return Array.isArray(c) ? c : (c ?? '').split(/\s+/).filter(Boolean);
};
const roleOf = (name: string) => {
  const c = commandOf(name);
  return c[0] === 'start' && c[1] === '--roles' ? c[2] : undefined;
};
const healthText = (name: string) => {
  const t = svc(name).healthcheck?.test;
  return Array.isArray(t) ? t.join(' ') : (t ?? '');
};

/** Read by the AWS SDK itself (its default credential chain), not by the service's environment schema. */
const SDK_ENV = ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY'];

/** The compose-spec JSON schema shipped in the `dclint` package, when it is installed. */
function composeSchemaPath(): string | undefined {
  try {
    const pkg = createRequire(import.meta.url).resolve('dclint/package.json');
    const path = join(dirname(pkg), 'schemas', 'compose.schema.json');
    return existsSync(path) ? path : undefined;
  } catch {
    return undefined;
  }
}

/** A Compose CLI on this machine: the docker plugin, else the standalone docker-compose. */
function composeCli(): string[] | undefined {
  const works = (cmd: string[]) => spawnSync(cmd[0]!, [...cmd.slice(1), 'version'], { stdio: 'ignore', timeout: 20_000 }).status === 0;
  if (works(['docker', 'compose'])) return ['docker', 'compose'];
  if (works(['docker-compose'])) return ['docker-compose'];
  return undefined;
}

describe('docker-compose.yml: valid Compose', () => {
  const schemaPath = composeSchemaPath();
  it.skipIf(!schemaPath)('validates against the Compose Specification JSON schema (dclint/schemas/compose.schema.json)', () => {
    // Its "$schema" is draft-07 written with https://, which Ajv does not know by that name.
    const { $schema: _draft, ...schema } = JSON.parse(readFileSync(schemaPath!, 'utf8')) as Json;
    const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);
    // Validated as written (before interpolation), as Compose does; merge keys resolved.
    const ok = validate(raw);
    expect(validate.errors ?? [], JSON.stringify(validate.errors, null, 2)).toEqual([]);
    expect(ok).toBe(true);
  });

  const cli = composeCli();
  it.skipIf(!cli)(`is accepted by \`${(cli ?? ['docker', 'compose']).join(' ')} config -q\``, () => {
    const res = spawnSync(cli![0]!, [...cli!.slice(1), '-f', COMPOSE_FILE, 'config', '-q'], { encoding: 'utf8', timeout: 60_000, cwd: ROOT });
    expect(res.status, `${res.stdout}${res.stderr}`).toBe(0);
  });
});

describe('docker-compose.yml: the production shape', () => {
  it('has Redis, MinIO and its bucket job, one watcher, two workers and two readers as separate services', () => {
    expect(Object.keys(services).sort()).toEqual(['minio', 'minio-init', 'reader-1', 'reader-2', 'redis', 'watcher', 'worker-1', 'worker-2'].sort());
    expect(ODDSFILES_SERVICES.map(roleOf)).toEqual(['watcher', 'worker', 'worker', 'reader', 'reader']);
    // Exactly one watcher per inbox.
    expect(Object.keys(services).filter((s) => roleOf(s)?.split(',').includes('watcher'))).toEqual(['watcher']);
    const images = new Set(ODDSFILES_SERVICES.map((s) => svc(s).image));
    expect(images.size).toBe(1);
    for (const s of ODDSFILES_SERVICES) {
      expect(svc(s).build, s).toBeDefined();
      expect(svc(s).restart, s).toBe('unless-stopped');
    }
  });

  it('gives every long-running service a health check, and starts oddsfiles only once Redis is healthy and the bucket exists', () => {
    for (const s of Object.keys(services).filter((n) => n !== 'minio-init')) {
      expect(svc(s).healthcheck?.test, s).toBeDefined();
      expect(svc(s).healthcheck?.disable, s).not.toBe(true);
    }
    expect(healthText('redis')).toMatch(/redis-cli ping/);
    expect(healthText('minio')).toMatch(/mc ready local|\/minio\/health\//);
    expect(svc('minio-init').depends_on).toEqual({ minio: { condition: 'service_healthy' } });
    for (const s of ODDSFILES_SERVICES) {
      expect(svc(s).depends_on, s).toEqual({
        redis: { condition: 'service_healthy' },
        'minio-init': { condition: 'service_completed_successfully' },
      });
    }
  });

  it('runs Redis append-only with noeviction (and a maxmemory for it to apply to), on a volume', () => {
    const cmd = commandOf('redis');
    const arg = (flag: string) => {
      const i = cmd.indexOf(flag);
      return i >= 0 ? cmd[i + 1] : undefined;
    };
    expect(cmd[0]).toBe('redis-server');
    expect(arg('--appendonly')).toBe('yes');
    expect(arg('--maxmemory-policy')).toBe('noeviction');
    expect(arg('--maxmemory')).toMatch(/^\d+(kb|mb|gb)?$/i);
    expect(svc('redis').volumes?.some((v) => /^redis:\/data$/.test(v))).toBe(true);
  });

  it('uses only environment variables the service reads (src/config/env.ts) or the AWS SDK does', () => {
    for (const s of ODDSFILES_SERVICES) {
      for (const name of Object.keys(env(s))) expect([...ENV_NAMES, ...SDK_ENV], `${s}: ${name}`).toContain(name);
    }
  });

  it('points every oddsfiles service at the same Redis prefix, the bucket minio-init creates, and MinIO with its credentials', () => {
    const bucketJob = (svc('minio-init').command as string[]).join(' ');
    const created = /mc mb (?:--ignore-existing )?\w+\/([a-z0-9.-]+)/.exec(bucketJob)?.[1];
    expect(created).toBeDefined();
    const minioEnv = Object.fromEntries(Object.entries(svc('minio').environment ?? {}).map(([k, v]) => [k, String(v)]));
    const first = env('watcher');
    for (const s of ODDSFILES_SERVICES) {
      const e = env(s);
      expect(e.REDIS_URL, s).toBe('redis://redis:6379');
      expect(e.REDIS_PREFIX, s).toBe(first.REDIS_PREFIX);
      expect(e.STORE_URL, s).toMatch(new RegExp(`^s3://${created!.replace(/\./g, '\\.')}(/[A-Za-z0-9._/-]+)?$`));
      expect(e.STORE_URL, s).toBe(first.STORE_URL);
      expect(e.S3_ENDPOINT, s).toBe('http://minio:9000');
      expect(e.S3_FORCE_PATH_STYLE, s).toBe('true');
      expect(e.AWS_REGION, s).toBeTruthy();
      expect(e.AWS_ACCESS_KEY_ID, s).toBe(minioEnv.MINIO_ROOT_USER);
      expect(e.AWS_SECRET_ACCESS_KEY, s).toBe(minioEnv.MINIO_ROOT_PASSWORD);
      expect(e.INBOX_DIR, s).toBe(first.INBOX_DIR);
      expect(e.REJECTED_DIR, s).toBe(first.REJECTED_DIR);
    }
    // MinIO wants a password of 8 characters or more.
    expect(minioEnv.MINIO_ROOT_PASSWORD!.length).toBeGreaterThanOrEqual(8);
  });

  it('shares one inbox volume (and one rejected volume) between the watcher and the workers; readers mount neither', () => {
    const mountAt = (s: string, path: string) =>
      svc(s)
        .volumes?.find((v) => v.split(':')[1] === path)
        ?.split(':')[0];
    const { INBOX_DIR, REJECTED_DIR } = env('watcher');
    const inbox = mountAt('watcher', INBOX_DIR!);
    const rejected = mountAt('watcher', REJECTED_DIR!);
    expect(inbox).toBeDefined();
    expect(rejected).toBeDefined();
    expect(Object.keys(compose.volumes ?? {})).toEqual(expect.arrayContaining([inbox!, rejected!, 'redis', 'minio']));
    for (const s of ['worker-1', 'worker-2']) {
      expect(mountAt(s, INBOX_DIR!), s).toBe(inbox);
      expect(mountAt(s, REJECTED_DIR!), s).toBe(rejected);
    }
    for (const s of ['reader-1', 'reader-2']) expect(svc(s).volumes ?? [], s).toEqual([]);
  });

  it('readers listen on 0.0.0.0:PORT, published on distinct host ports, health-checked on /readyz', () => {
    const hostPorts = new Set<string>();
    for (const s of ['reader-1', 'reader-2']) {
      const e = env(s);
      expect(e.HOST, s).toBe('0.0.0.0');
      expect(e.PORT, s).toMatch(/^\d+$/);
      const mapping = svc(s).ports?.[0] ?? '';
      const parts = mapping.split(':');
      expect(parts.at(-1), s).toBe(e.PORT);
      hostPorts.add(parts.at(-2)!);
      expect(healthText(s), s).toContain(`http://127.0.0.1:${e.PORT}/readyz`);
    }
    expect(hostPorts.size).toBe(2);
  });

  it('the watcher and the workers serve /healthz on METRICS_PORT for their health check', () => {
    for (const s of ['watcher', 'worker-1', 'worker-2']) {
      const port = env(s).METRICS_PORT;
      expect(port, s).toMatch(/^\d+$/);
      expect(healthText(s), s).toContain(`http://127.0.0.1:${port}/healthz`);
    }
  });

  it('gives the workers more time to stop than ingest.shutdown_timeout, so SIGTERM drains in-flight jobs', () => {
    const shutdownMs = parseDuration(DEFAULT_FILE_CONFIG.ingest.shutdown_timeout)!;
    for (const s of ['worker-1', 'worker-2']) {
      const grace = svc(s).stop_grace_period;
      expect(grace, s).toBeDefined();
      expect(parseDuration(grace!)!, s).toBeGreaterThan(shutdownMs);
    }
  });
});

describe('Dockerfile and .dockerignore', () => {
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));

  it('runs the built command as an unprivileged user that owns the folders the volumes mount on', () => {
    expect(runtime).toMatch(/^USER node$/m);
    expect(runtime).toMatch(/^ENTRYPOINT \["node", "dist\/bin\/oddsfiles\.js"\]$/m);
    const inbox = env('watcher').INBOX_DIR!;
    const rejected = env('watcher').REJECTED_DIR!;
    const mkdir = /^RUN mkdir -p (.+?) && chown -R node:node (\S+)$/m.exec(runtime);
    expect(mkdir, 'RUN mkdir -p … && chown -R node:node …').not.toBeNull();
    expect(mkdir![1]!.split(/\s+/)).toEqual(expect.arrayContaining([inbox, rejected]));
    expect(inbox.startsWith(`${mkdir![2]}/`)).toBe(true);
    // The user is set after the folders are made, and what the command needs at run time is copied.
    expect(runtime.indexOf('USER node')).toBeGreaterThan(runtime.indexOf('chown'));
    for (const what of ['package.json', 'node_modules', 'dist', 'schemas', 'packages/client/package.json', 'packages/client/dist'])
      expect(runtime).toContain(`/app/${what}`);
    // The workspace the lock file names is in the build stage, or `npm ci` refuses.
    for (const what of ['packages/client/package.json', 'packages/client/src', 'packages/client/bin']) expect(dockerfile).toContain(`COPY ${what}`);
  });

  it('runs Node with the memory settings the memory and stall benches measured (two malloc arenas, big blocks mapped and freed memory returned, a 4 MB young generation)', () => {
    const envBlock = /^ENV ((?:.*\\\n)*.*)$/m.exec(runtime)?.[1] ?? '';
    const vars = Object.fromEntries(
      envBlock
        .split(/\\\n|\s+/)
        .map((x) => x.trim())
        .filter((x) => x.includes('='))
        .map((x) => [x.slice(0, x.indexOf('=')), x.slice(x.indexOf('=') + 1)]),
    );
    expect(vars.MALLOC_ARENA_MAX).toBe('2');
    expect(vars.MALLOC_MMAP_THRESHOLD_).toBe('131072');
    expect(vars.MALLOC_TRIM_THRESHOLD_).toBe('131072');
    expect(vars.NODE_OPTIONS).toBe('--max-semi-space-size=4');
  });

  it('keeps dependencies, build output, local data and secrets out of the build context', () => {
    const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim());
    for (const p of ['node_modules', 'dist', 'var', '.git', '.env', 'oddsfiles.yaml']) expect(ignored, p).toContain(p);
  });
});

describe('docs/production.md: the IAM policies cover what the S3 store calls', () => {
  const doc = readFileSync(join(ROOT, 'docs/production.md'), 'utf8');
  const policies = [...doc.matchAll(/```json\n([\s\S]*?)```/g)].map(
    (m) => JSON.parse(m[1]!) as { Statement: { Action: string | string[]; Resource: string }[] },
  );
  const actionsOf = (p: (typeof policies)[number]) => new Set(p.Statement.flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action])));
  /** The IAM action that authorizes each S3 API call (HeadBucket is authorized as s3:ListBucket). */
  const PERMISSION: Record<string, string> = {
    PutObject: 's3:PutObject',
    GetObject: 's3:GetObject',
    HeadObject: 's3:GetObject',
    DeleteObject: 's3:DeleteObject',
    ListObjectsV2: 's3:ListBucket',
    HeadBucket: 's3:ListBucket',
  };

  it('has a worker (read-write) and a reader (read-only but for the staged uploads under incoming/) policy, valid JSON', () => {
    expect(policies).toHaveLength(2);
    const [worker, reader] = policies.map(actionsOf);
    expect([...worker!].sort()).toEqual(['s3:DeleteObject', 's3:GetObject', 's3:ListBucket', 's3:PutObject']);
    expect([...reader!].sort()).toEqual(['s3:DeleteObject', 's3:GetObject', 's3:ListBucket', 's3:PutObject']);
    // A reader writes nowhere but the staged uploads (src/ingest/http/staged.ts: STAGED_PREFIX).
    for (const st of policies[1]!.Statement) {
      const actions = [st.Action].flat();
      if (actions.some((a) => a === 's3:PutObject' || a === 's3:DeleteObject')) expect(st.Resource).toMatch(/\/incoming\/\*$/);
    }
    expect(readFileSync(join(ROOT, 'src/ingest/http/staged.ts'), 'utf8')).toContain("STAGED_PREFIX = 'incoming/'");
  });

  it('grants the worker every call src/store/s3-store.ts makes', () => {
    const source = readFileSync(join(ROOT, 'src/store/s3-store.ts'), 'utf8');
    const commands = [...source.matchAll(/new (\w+)Command\(/g)].map((m) => m[1]!);
    expect(commands.length).toBeGreaterThan(0);
    const worker = actionsOf(policies[0]!);
    for (const c of new Set(commands)) {
      expect(PERMISSION[c], `${c}Command: add its IAM action to docs/production.md and to this test`).toBeDefined();
      expect(worker.has(PERMISSION[c]!), c).toBe(true);
    }
  });
});
