/**
 * The bare reference pipeline of the freshness benchmarks (started by bench/lib/bare/system.ts,
 * never run by hand): the architecture of oddsfiles reduced to the work it cannot avoid, in one process.
 *
 *   fs.watch(inbox) ─▶ claim (rename into .processing) ─▶ read ─▶ JSON.parse ─▶ sha256
 *   ─▶ store: temp file + fsync + rename + fsync dir ─▶ Redis MULTI(HSET catalog, PUBLISH)
 *   ─▶ subscriber: re-read the object from the store ─▶ node:http serves it from a Map
 *
 * No queue, no settle delay, no schema, no newest-wins check, no manifest, no compression.
 *
 * With `queue` (a concurrency), each file event is a BullMQ job instead, taken by a BullMQ worker
 * of that concurrency: the same work behind the queue oddsfiles is built on, the floor of its
 * ingest with the packages it is made of.
 */
import { existsSync, watch } from 'node:fs';
import { createHash } from 'node:crypto';
import { mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';

interface BareEnv {
  dataDir: string;
  prefix: string;
  redisUrl: string;
  key: string;
  /** Through a BullMQ queue, taken at this concurrency; none: straight from the watcher. */
  queue?: number;
}

const env = JSON.parse(process.env.BARE ?? '{}') as BareEnv;
const inbox = join(env.dataDir, 'inbox');
const processing = join(inbox, '.processing');
const store = join(env.dataDir, 'store');
const channel = `${env.prefix}:bare:changes`;
const catalog = `${env.prefix}:bare:catalog`;

const held = new Map<string, { body: Buffer; etag: string }>();
const dirs = new Set<string>();
let claims = 0;

const redis = new Redis(env.redisUrl);
const sub = new Redis(env.redisUrl);

async function handle(name: string): Promise<void> {
  const claim = join(processing, `${++claims}--${name}`);
  try {
    await rename(join(inbox, name), claim);
  } catch {
    return; // gone: the event of our own rename, or another event for the same drop
  }
  const bytes = await readFile(claim);
  const doc = JSON.parse(bytes.toString('utf8')) as { generated_at?: unknown };
  if (typeof doc.generated_at !== 'string') throw new Error(`${name}: no generated_at`);
  const sha = createHash('sha256').update(bytes).digest('hex');
  const dir = join(store, name);
  if (!dirs.has(dir)) {
    await mkdir(dir, { recursive: true });
    dirs.add(dir);
  }
  const object = join(dir, `${sha}.json`);
  const tmp = join(store, `.${sha}.tmp`);
  const fh = await open(tmp, 'w');
  try {
    await fh.writeFile(bytes);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, object);
  const d = await open(dir, 'r');
  try {
    await d.sync();
  } finally {
    await d.close();
  }
  const entry = JSON.stringify({ name, sha256: sha, object, generatedAt: doc.generated_at });
  await redis.multi().hset(catalog, name, entry).publish(channel, entry).exec();
  await unlink(claim);
}

function ready(r: Redis): Promise<void> {
  return r.status === 'ready' ? Promise.resolve() : new Promise((res) => r.once('ready', () => res()));
}

async function main(): Promise<void> {
  await mkdir(processing, { recursive: true });
  await mkdir(store, { recursive: true });
  await Promise.all([ready(redis), ready(sub)]);
  await sub.subscribe(channel);
  sub.on('message', (_ch: string, message: string) => {
    const m = JSON.parse(message) as { name: string; sha256: string; object: string };
    void readFile(m.object).then((body) => held.set(m.name, { body, etag: `"${m.sha256.slice(0, 32)}"` }));
  });
  const failed = (err: unknown) => process.stderr.write(`bare: ${(err as Error).message}\n`);
  let take = (name: string) => void handle(name).catch(failed);
  let closeQueue = async () => {};
  if (env.queue) {
    const connection = new Redis(env.redisUrl, { maxRetriesPerRequest: null });
    const queue = new Queue<{ name: string }>('bare', { connection, prefix: env.prefix });
    const worker = new Worker<{ name: string }>('bare', (job) => handle(job.data.name), {
      connection: new Redis(env.redisUrl, { maxRetriesPerRequest: null }),
      prefix: env.prefix,
      concurrency: env.queue,
    });
    worker.on('failed', (_job, err) => failed(err));
    await worker.waitUntilReady();
    // fs.watch also tells of the claim's rename out of the inbox: a file no longer there is not queued.
    take = (name) => {
      if (existsSync(join(inbox, name))) void queue.add('drop', { name }, { removeOnComplete: true }).catch(failed);
    };
    closeQueue = async () => {
      await worker.close();
      await queue.close();
    };
  }
  watch(inbox, (_event, name) => {
    if (!name || name.startsWith('.') || name.endsWith('.tmp') || name.endsWith('.part')) return;
    take(name);
  });
  const server = createServer((req, res) => {
    if (req.headers['x-api-key'] !== env.key) {
      res.writeHead(401).end();
      return;
    }
    const url = req.url ?? '';
    const v = url.startsWith('/v1/data/') ? held.get(url.slice(9)) : undefined;
    if (!v) {
      res.writeHead(404).end();
      return;
    }
    if (req.headers['if-none-match'] === v.etag) {
      res.writeHead(304, { etag: v.etag }).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': v.body.length, etag: v.etag });
    res.end(v.body);
  });
  server.keepAliveTimeout = 72_000;
  server.listen(0, '127.0.0.1', () => {
    const a = server.address();
    process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}` })}\n`);
  });
  process.on('SIGTERM', async () => {
    await closeQueue().catch(failed);
    server.close();
    redis.disconnect();
    sub.disconnect();
    process.exit(0);
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`bare: ${(err as Error).stack}\n`);
  process.exit(1);
});
