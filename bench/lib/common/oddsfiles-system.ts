/**
 * A running oddsfiles deployment on a fresh data dir and Redis prefix, in one of the process
 * layouts users run, with an API key on the `pro` plan when it has a reader.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { TEST_REDIS_URL } from '../../../test/helpers/redis.js';
import { baseEnv, runCli } from '../../../test/helpers/service.js';
import { OddsfilesProcess } from './oddsfiles-process.js';
import { benchPrefix, onCleanup, tempDir } from './run.js';

export type Shape = 'single' | 'split' | 'ingest' | 'pair' | 'worker-only';

/** [roles, log name] of each process: every role in one (`npm start`); one per role (compose); watcher+worker alone; watcher+worker and a reader; watcher and worker apart, no reader. */
const LAYOUTS: Record<Shape, readonly (readonly [string, string])[]> = {
  single: [['watcher,worker,reader', 'all-worker-reader']],
  split: [
    ['watcher', 'watcher'],
    ['worker', 'worker'],
    ['reader', 'reader'],
  ],
  ingest: [['watcher,worker', 'watcher-worker']],
  pair: [
    ['watcher,worker', 'watcher-worker'],
    ['reader', 'reader'],
  ],
  'worker-only': [
    ['watcher', 'watcher'],
    ['worker', 'worker'],
  ],
};

export interface OddsfilesOptions {
  readonly label: string;
  readonly shape: Shape;
  /** Extra `--roles worker` processes. */
  readonly extraWorkers?: number;
  /** Merged into the config file (e.g. { ingest: { concurrency: 8 } }, a registry). */
  readonly config?: Record<string, unknown>;
  readonly logLevel?: string;
  readonly env?: Record<string, string>;
  /** Node options before the script (e.g. --cpu-prof, which NODE_OPTIONS refuses). */
  readonly nodeArgs?: readonly string[];
  /** The entry point to run (default: this checkout's dist/bin/oddsfiles.js), e.g. an older build's for an A/B. */
  readonly bin?: string;
  /** The reader role's process alone: more arguments (e.g. --processes 2) and node options (e.g. --cpu-prof). */
  readonly reader?: { readonly args?: readonly string[]; readonly nodeArgs?: readonly string[] };
}

/**
 * A config file for a bench: the `pro` plan and the publish rate without a practical limit (a tight
 * poll loop or a load generator would get 429s), plus `extra`. JSON is YAML.
 */
/** The `oddsfiles` entry point of another checkout's build: dist/bin/, or dist/workers/ in builds before bin/ existed. */
export function builtEntry(checkout: string): string {
  const bin = resolve(checkout, 'dist', 'bin', 'oddsfiles.js');
  return existsSync(bin) ? bin : resolve(checkout, 'dist', 'workers', 'oddsfiles.js');
}

export async function writeConfig(dir: string, extra: Record<string, unknown> = {}): Promise<string> {
  const path = join(dir, `oddsfiles-${randomBytes(3).toString('hex')}.yaml`);
  const config = { plans: { pro: { allow: ['*'], rate: { max: 1_000_000_000, per: '1m' } } }, publish: { rate: { max: 1_000_000_000, per: '1m' } }, ...extra };
  await writeFile(path, JSON.stringify(config, null, 1));
  return path;
}

export class OddsfilesSystem {
  readonly kind = 'oddsfiles';
  readonly procs: OddsfilesProcess[] = [];
  readerUrl: string | undefined;
  /** The processes serving the reader: the reader's own, or those it supervises (`--processes`). */
  readerPids: number[] = [];
  key = '';
  /** A publisher key for every filename (PUT /v1/data), when the system has a reader. */
  publisherKey = '';
  private queue: Queue | undefined;
  private queueRedis: Redis | undefined;

  private constructor(
    readonly label: string,
    readonly dataDir: string,
    readonly prefix: string,
    readonly env: Record<string, string>,
  ) {}

  get inbox(): string {
    return join(this.dataDir, 'inbox');
  }

  get channel(): string {
    return `${this.prefix}:catalog:changes`;
  }

  get catalogKey(): string {
    return `${this.prefix}:catalog`;
  }

  pids(): number[] {
    return this.procs.map((p) => p.pid);
  }

  /** The (first) process running the worker role. */
  get worker(): OddsfilesProcess {
    return this.procs.find((p) => p.roles.includes('worker'))!;
  }

  get reader(): OddsfilesProcess | undefined {
    return this.procs.find((p) => p.roles.includes('reader'));
  }

  static async start(opts: OddsfilesOptions): Promise<OddsfilesSystem> {
    const dataDir = await tempDir(opts.label);
    const prefix = benchPrefix(opts.label);
    const configPath = await writeConfig(dataDir, opts.config);
    const env = baseEnv(dataDir, prefix, { ODDSFILES_CONFIG: configPath, LOG_LEVEL: opts.logLevel ?? 'info', ...opts.env });
    const sys = new OddsfilesSystem(opts.label, dataDir, prefix, env);
    onCleanup(() => sys.stop());
    const layout = [...LAYOUTS[opts.shape]];
    for (let i = 0; i < (opts.extraWorkers ?? 0); i++) layout.push(['worker', `extra${i}-worker`]);
    // One after another: each creates the inbox, the queue... on its start.
    for (const [roles, name] of layout) {
      const reads = roles.split(',').includes('reader');
      const args = ['start', '--roles', roles, ...((reads && opts.reader?.args) || [])];
      const nodeArgs = [...(opts.nodeArgs ?? []), ...((reads && opts.reader?.nodeArgs) || [])];
      const p = new OddsfilesProcess(env, args, join(dataDir, `${name}.log`), roles.split(','), nodeArgs, opts.bin);
      sys.procs.push(p);
      // Under --processes each reader process logs its start too: the supervisor's line names them all.
      const supervised = reads && opts.reader?.args?.includes('--processes') === true;
      const started = await p.waitForLine((l) => l.msg === 'oddsfiles started' && (!supervised || Array.isArray(l.pids)), 'oddsfiles started');
      if (typeof started.reader === 'string') sys.readerUrl = started.reader;
      if (reads) sys.readerPids = Array.isArray(started.pids) ? (started.pids as number[]) : [p.pid];
    }
    if (sys.readerUrl) {
      const created = await runCli(env, ['keys', 'create', '--name', 'bench', '--plan', 'pro']);
      if (created.code !== 0) throw new Error(`keys create failed: ${created.stderr}`);
      sys.key = created.stdout.trim();
      const publisher = await runCli(env, ['keys', 'create', '--name', 'bench-publisher', '--publish', '*']);
      if (publisher.code !== 0) throw new Error(`keys create --publish failed: ${publisher.stderr}`);
      sys.publisherKey = publisher.stdout.trim();
    }
    return sys;
  }

  /** The BullMQ queue (to read the jobs' own timestamps). */
  ingestQueue(): Queue {
    if (!this.queue) {
      this.queueRedis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
      this.queue = new Queue('ingest', { connection: this.queueRedis, prefix: this.prefix });
    }
    return this.queue;
  }

  /** Inbox and .processing hold no drop. */
  async drained(): Promise<boolean> {
    const inbox = (await readdir(this.inbox)).filter((n) => !n.startsWith('.') && !n.endsWith('.tmp'));
    if (inbox.length > 0) return false;
    return (await readdir(join(this.inbox, '.processing'))).filter((n) => !n.endsWith('.tmp')).length === 0;
  }

  async stop(): Promise<void> {
    await this.queue?.close().catch(() => undefined);
    this.queueRedis?.disconnect();
    this.queue = undefined;
    await Promise.all(this.procs.map((p) => p.stop()));
  }
}
