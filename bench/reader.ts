/**
 * Reader benchmark: requests per second of the Fastify reader against a bare node:http server
 * that answers with the same bytes from a Buffer after a Map lookup of the key, in the same run.
 *
 *   npx tsx bench/reader.ts [--rounds 3] [--duration 5] [--warmup 1] [--connections 32] [--only files]
 *   BENCH_LOG_LEVEL=warn npx tsx bench/reader.ts      # the reader without its request log
 *
 * Needs the Redis of the tests (TEST_REDIS_URL, default redis://127.0.0.1:6379); uses a unique
 * prefix and a temp store, and removes both. Each server runs in its own child process and they
 * are loaded one at a time, so autocannon (in this process) never shares an event loop with them.
 * The reader logs one line per request, as in production, to /dev/null.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import autocannon from 'autocannon';
import { dropPrefix } from '../test/helpers/redis.js';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { createCatalog } from '../src/catalog/redis-catalog.js';
import type { CatalogEntry } from '../src/catalog/types.js';
import { loadConfig } from '../src/config.js';
import { buildRegistry } from '../src/feeds/registry.js';
import { createKeyStore } from '../src/keys/store.js';
import { createLogger } from '../src/log.js';
import { startReader } from '../src/reader/index.js';
import { createRedis } from '../src/redis/connect.js';
import { redisKeys } from '../src/redis/keys.js';
import { createFsStore } from '../src/store/fs-store.js';
import { objectKey } from '../src/store/store.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const BIG_FILE = 'site_pregame_northwind_soccer.json';
const BIG_BYTES = 200 * 1024;

interface ServeEnv {
  prefix: string;
  dir: string;
  key: string;
}

// ---------------------------------------------------------------- children: the two servers

async function serveReader(env: ServeEnv): Promise<void> {
  const config = loadConfig({ env: { REDIS_URL, REDIS_PREFIX: env.prefix, DATA_DIR: env.dir, PORT: '0', HOST: '127.0.0.1' }, cwd: env.dir });
  const sink = pino.destination({ dest: '/dev/null', sync: false, minLength: 8 * 1024 }) as unknown as NodeJS.WritableStream;
  const log = createLogger({ level: process.env.BENCH_LOG_LEVEL ?? 'info', pretty: false, destination: sink });
  const redis = createRedis(REDIS_URL, 'client', 'bench-reader');
  const subscriber = createRedis(REDIS_URL, 'subscriber', 'bench-reader-sub');
  const store = createFsStore(pathToFileURL(join(env.dir, 'store')).href);
  const reader = await startReader({
    config,
    redis,
    subscriber,
    store,
    catalog: createCatalog(redis, redisKeys(env.prefix)),
    log,
    registry: buildRegistry(config.bookmakers, config.sports),
  });
  await reader.ready;
  // Let the compressed variants be made before saying we are up.
  await new Promise((r) => setTimeout(r, 500));
  process.stdout.write(`${JSON.stringify({ url: reader.url })}\n`);
  process.on('SIGTERM', () => void reader.close().finally(() => process.exit(0)));
}

async function serveBaseline(env: ServeEnv): Promise<void> {
  const files = await readFile(join(env.dir, 'baseline-files.json'));
  const big = await readFile(join(env.dir, 'baseline-big.json'));
  const bigGz = await readFile(join(env.dir, 'baseline-big.json.gz'));
  const keys = new Map([[env.key, { id: 'bench' }]]);
  const etag = `"${createHash('sha256').update(big).digest('hex').slice(0, 32)}"`;
  const routes = new Map<string, { identity: Buffer; gzip?: Buffer }>([
    ['/v1/files', { identity: files }],
    [`/v1/data/${BIG_FILE}`, { identity: big, gzip: bigGz }],
  ]);
  const server = createServer((req, res) => {
    if (!keys.has(req.headers['x-api-key'] as string)) {
      res.writeHead(401).end();
      return;
    }
    const route = routes.get(req.url ?? '');
    if (!route) {
      res.writeHead(404).end();
      return;
    }
    const gz = route.gzip !== undefined && (req.headers['accept-encoding'] ?? '').includes('gzip');
    const body = gz ? route.gzip! : route.identity;
    const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': body.length, etag };
    if (gz) headers['content-encoding'] = 'gzip';
    res.writeHead(200, headers);
    res.end(body);
  });
  server.keepAliveTimeout = 72_000;
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
  });
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}

// ---------------------------------------------------------------- parent: data, load, report

function oddsDocument(bookmaker: string, sport: string, bytes: number): Buffer {
  const events: unknown[] = [];
  const doc = { bookmaker, sport, generated_at: new Date().toISOString(), events };
  let size = JSON.stringify(doc).length;
  for (let i = 0; size < bytes; i++) {
    const e = {
      event_id: `ev-${i}`,
      name: `Team ${i % 23} vs Team ${(i * 7) % 29}`,
      starts_at: new Date(Date.UTC(2030, 0, 1, i % 24)).toISOString(),
      league: `League ${i % 9}`,
      markets: [{ market: '1X2', selections: [{ name: '1', odds: 1.5 + (i % 10) / 10 }, { name: 'X', odds: 3.1 + (i % 7) / 10 }, { name: '2', odds: 4.2 + (i % 5) / 10 }] }],
    };
    const text = JSON.stringify(e);
    if (size + text.length + 1 > bytes) break;
    events.push(e);
    size += text.length + 1;
  }
  return Buffer.from(JSON.stringify(doc));
}

async function seed(prefix: string, dir: string): Promise<string> {
  const config = loadConfig({ env: { REDIS_URL, REDIS_PREFIX: prefix, DATA_DIR: dir }, cwd: dir });
  const registry = buildRegistry(config.bookmakers, config.sports);
  const redis = createRedis(REDIS_URL, 'client', 'bench-seed');
  if (redis.status !== 'ready') await new Promise((r) => redis.once('ready', r));
  const keys = redisKeys(prefix);
  const catalog = createCatalog(redis, keys);
  const store = createFsStore(pathToFileURL(join(dir, 'store')).href);
  const now = Date.now();
  for (const info of registry.feeds.values()) {
    const bytes = info.filename === BIG_FILE ? oddsDocument(info.bookmaker, info.sport ?? 'soccer', BIG_BYTES) : oddsDocument(info.bookmaker, info.sport ?? 'soccer', 4000);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const entry: CatalogEntry = {
      filename: info.filename,
      bookmaker: info.bookmaker,
      kind: info.kind,
      sport: info.sport,
      object: objectKey(info.filename, sha256),
      sha256,
      size: bytes.length,
      generatedAt: new Date(now).toISOString(),
      generatedAtMs: now,
      publishedAt: new Date(now).toISOString(),
    };
    await store.put(entry.object, bytes);
    await catalog.commit(entry, 10);
  }
  const { key } = await createKeyStore({ redis, keys, plans: config.plans }).create({ name: 'bench', plan: 'pro' });
  redis.disconnect();
  return key;
}

function startChild(role: 'reader' | 'baseline', env: ServeEnv): Promise<{ child: ChildProcess; url: string }> {
  const extra = role === 'reader' && process.env.BENCH_READER_NODE_ARGS ? process.env.BENCH_READER_NODE_ARGS.split(' ') : [];
  const child = spawn(process.execPath, [...extra, '--import', 'tsx', fileURLToPath(import.meta.url), '--serve', role], {
    env: { ...process.env, BENCH_SERVE: JSON.stringify(env) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve({ child, url: (JSON.parse(line) as { url: string }).url });
    });
    child.on('exit', (code) => reject(new Error(`${role} exited early (${code})`)));
  });
}

interface Scenario {
  readonly name: string;
  readonly path: string;
  readonly headers: Record<string, string>;
}

async function load(url: string, s: Scenario, key: string, seconds: number, connections: number) {
  const result = await autocannon({
    url: url + s.path,
    connections,
    duration: seconds,
    headers: { 'x-api-key': key, ...s.headers },
  });
  const ok = result['2xx'];
  const bad = result.non2xx + result.errors + result.timeouts;
  if (bad > 0 || ok === 0) throw new Error(`${s.name} at ${url}: ${ok} ok, ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  return { rps: result.requests.average, p99: result.latency.p99, mbps: result.throughput.average / 1e6 };
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const opt = (name: string, fallback: number) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? Number(args[i + 1]) : fallback;
  };
  const seconds = opt('duration', 5);
  const rounds = opt('rounds', 3);
  const warmup = opt('warmup', 1);
  const connections = opt('connections', 32);
  const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined;

  const prefix = `bench-reader-${process.pid}-${randomBytes(3).toString('hex')}`;
  const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-bench-'));
  const children: ChildProcess[] = [];
  try {
    const key = await seed(prefix, dir);
    const env: ServeEnv = { prefix, dir, key };
    const reader = await startChild('reader', env);
    children.push(reader.child);

    // The baseline serves exactly the bytes the reader serves.
    const files = Buffer.from(await (await fetch(`${reader.url}/v1/files`, { headers: { 'x-api-key': key } })).arrayBuffer());
    const big = Buffer.from(await (await fetch(`${reader.url}/v1/data/${BIG_FILE}`, { headers: { 'x-api-key': key } })).arrayBuffer());
    await writeFile(join(dir, 'baseline-files.json'), files);
    await writeFile(join(dir, 'baseline-big.json'), big);
    await writeFile(join(dir, 'baseline-big.json.gz'), gzipSync(big, { level: 6 }));
    const baseline = await startChild('baseline', env);
    children.push(baseline.child);

    const kb = Math.round(big.length / 1024);
    const scenarios: Scenario[] = [
      { name: `GET /v1/files (${files.length} B)`, path: '/v1/files', headers: {} },
      { name: `GET /v1/data, ${kb} KB, identity`, path: `/v1/data/${BIG_FILE}`, headers: {} },
      { name: `GET /v1/data, ${kb} KB, gzip`, path: `/v1/data/${BIG_FILE}`, headers: { 'accept-encoding': 'gzip' } },
    ].filter((x) => !only || x.name.includes(only)) as Scenario[];
    const rows: string[] = [];
    const started = Date.now();
    const servers = { baseline: baseline.url, reader: reader.url };
    for (const s of scenarios) {
      for (const url of Object.values(servers)) if (warmup > 0) await load(url, s, key, warmup, connections);
      // Interleaved rounds, the order flipped each round; medians are reported. A shared
      // machine is noisy: one long run each would mostly measure the neighbours.
      const runs: Record<keyof typeof servers, Awaited<ReturnType<typeof load>>[]> = { baseline: [], reader: [] };
      for (let r = 0; r < rounds; r++) {
        const order = (r % 2 === 0 ? ['baseline', 'reader'] : ['reader', 'baseline']) as (keyof typeof servers)[];
        for (const label of order) runs[label].push(await load(servers[label], s, key, seconds, connections));
      }
      const bare = median(runs.baseline);
      const ours = median(runs.reader);
      const ratio = ours.rps / bare.rps;
      rows.push(`| ${s.name} | ${fmt(bare.rps)} | ${fmt(ours.rps)} | **${ratio.toFixed(2)}×** | ${bare.p99} / ${ours.p99} | ${ours.mbps.toFixed(0)} |`);
      process.stderr.write(
        `${s.name}: bare ${runs.baseline.map((x) => fmt(x.rps)).join(' ')} | reader ${runs.reader.map((x) => fmt(x.rps)).join(' ')} req/s → ratio of medians ${ratio.toFixed(2)}×\n`,
      );
    }

    const machine = `${availableParallelism()} CPUs (${cpus()[0]?.model.trim() ?? 'unknown'}), Node ${process.version}, ${process.platform}/${process.arch}`;
    process.stdout.write(
      [
        '',
        `Machine: ${machine}. Reader request log: ${process.env.BENCH_LOG_LEVEL ?? 'info'} level, buffered to /dev/null.`,
        `Load: autocannon in the parent process, ${connections} connections, keep-alive; per scenario ${warmup} s warm-up each, then ${rounds} interleaved rounds of ${seconds} s per server, medians; ${Math.round((Date.now() - started) / 1000)} s of load in all.`,
        '',
        '| scenario | bare node:http (req/s) | reader (req/s) | reader / bare | p99 ms (bare / reader) | reader MB/s |',
        '|---|---:|---:|---:|---:|---:|',
        ...rows,
        '',
      ].join('\n'),
    );
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await dropPrefix(prefix);
    await rm(dir, { recursive: true, force: true });
  }
}

function median<T extends { rps: number }>(runs: T[]): T {
  return [...runs].sort((a, b) => a.rps - b.rps)[Math.floor(runs.length / 2)]!;
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}


const serveIndex = process.argv.indexOf('--serve');
if (serveIndex >= 0) {
  const env = JSON.parse(process.env.BENCH_SERVE ?? '{}') as ServeEnv;
  const role = process.argv[serveIndex + 1];
  void (role === 'reader' ? serveReader(env) : serveBaseline(env)).catch((err: unknown) => {
    process.stderr.write(`bench ${role}: ${(err as Error).stack}\n`);
    process.exit(1);
  });
} else {
  main().catch((err: unknown) => {
    process.stderr.write(`bench: ${(err as Error).stack}\n`);
    process.exitCode = 1;
  });
}
