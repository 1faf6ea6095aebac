/**
 * What `redis.wait_replicas: 1` costs: the catalog commit (the script the workers run) against a
 * primary with one replica on loopback ports (two redis-server processes this bench starts), with
 * and without the WAIT after it, rounds interleaved. Measured per commit: the acknowledgement
 * (commit + WAIT: what a PUT's 201 and a drop's outcome wait for) and the announcement reaching a
 * subscriber (what readers learn from: the script publishes it before the WAIT, so readers are not
 * held back). Reference in the same run: the same commits without WAIT.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { createCatalog } from '../src/catalog/redis-catalog.js';
import type { CatalogEntry } from '../src/catalog/types.js';
import { redisKeys } from '../src/redis/key-names.js';
import { benchArgs, commandLine } from './lib/common/cli.js';
import { machineInfo, machineLine } from './lib/common/machine.js';
import { publishReport, table } from './lib/common/report.js';
import { log, onCleanup, runMain, tempDir } from './lib/common/run.js';
import { fmtMs, nowMs, quantile } from './lib/common/stats.js';

const args = benchArgs('The cost of redis.wait_replicas: 1 on the catalog commit, against a primary and a replica.', {
  commits: { type: 'number', default: 2000, quick: 200, description: 'commits per variant and round' },
  rounds: { type: 'number', default: 4, quick: 2, description: 'rounds (variants interleaved)' },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});
const WRITE_DOC = !args['no-doc'] && !args.quick;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

async function server(dir: string, extra: string[]): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', ...extra], {
    stdio: 'ignore',
  });
  onCleanup(async () => void child.kill('SIGKILL'));
  const probe = new Redis({ port, lazyConnect: true, retryStrategy: () => 50 });
  probe.on('error', () => undefined);
  for (let i = 0; i < 100; i++) {
    if ((await probe.ping().catch(() => '')) === 'PONG') break;
    await new Promise((r) => setTimeout(r, 50));
  }
  probe.disconnect();
  return { port, child };
}

interface Sample {
  ack: number[];
  seen: number[];
}

async function main(): Promise<void> {
  const started = Date.now();
  const machine = machineInfo();
  log(machineLine(machine));
  const primary = await server(await tempDir('wait-primary'), []);
  await server(await tempDir('wait-replica'), ['--replicaof', '127.0.0.1', String(primary.port)]);
  const redis = new Redis({ port: primary.port });
  for (let i = 0; i < 100 && !/slave0:.*state=online/.test(await redis.info('replication')); i++) await new Promise((r) => setTimeout(r, 50));
  const sub = new Redis({ port: primary.port });
  const keys = redisKeys('bench-wait');
  const announced = new Map<number, number>();
  await sub.subscribe(keys.catalogChannel);
  sub.on('message', (_c: string, m: string) => announced.set((JSON.parse(m) as { seq: number }).seq, nowMs()));
  const variants = [
    { name: 'no wait (wait_replicas: 0)', catalog: createCatalog(redis, keys, undefined, undefined, { waitReplicas: 0 }) },
    { name: 'WAIT 1 replica (wait_replicas: 1)', catalog: createCatalog(redis, keys, undefined, undefined, { waitReplicas: 1, waitTimeoutMs: 2000 }) },
  ];
  const samples = new Map<string, Sample>(variants.map((v) => [v.name, { ack: [], seen: [] }]));
  let n = 0;
  for (let round = 0; round < args.rounds; round++) {
    for (const v of round % 2 === 0 ? variants : [...variants].reverse()) {
      const s = samples.get(v.name)!;
      for (let i = 0; i < args.commits; i++) {
        n++;
        const sha = n.toString(16).padStart(64, '0');
        const entry: CatalogEntry = {
          filename: `f${n % 50}.json`,
          bookmaker: 'b',
          kind: 'live',
          sport: null,
          object: `objects/f/${sha}.json`,
          sha256: sha,
          size: 100,
          generatedAt: new Date(1_700_000_000_000 + n).toISOString(),
          generatedAtMs: 1_700_000_000_000 + n,
          publishedAt: new Date().toISOString(),
        };
        const t0 = nowMs();
        const r = await v.catalog.commit(entry, 2);
        s.ack.push(nowMs() - t0);
        await new Promise<void>((res) => setImmediate(res));
        const at = announced.get(r.seq);
        if (at !== undefined) s.seen.push(at - t0);
        announced.delete(r.seq);
      }
    }
    log(`round ${round + 1}/${args.rounds} done`);
  }
  await redis.eval(`for _, k in ipairs(redis.call('KEYS', 'bench-wait:*')) do redis.call('DEL', k) end`, 0);
  redis.disconnect();
  sub.disconnect();
  const row = (name: string) => {
    const s = samples.get(name)!;
    return [name, fmtMs(quantile(s.ack, 0.5)), fmtMs(quantile(s.ack, 0.99)), fmtMs(quantile(s.seen, 0.5)), fmtMs(quantile(s.seen, 0.99))];
  };
  const ack = (name: string) => quantile(samples.get(name)!.ack, 0.5);
  const report = [
    '# Benchmark: redis-wait',
    '',
    'Written by `bench/`; see [BENCHMARKS.md](../BENCHMARKS.md) for how to run it and the targets.',
    '',
    machineLine(machine),
    '',
    `Run: ${new Date(started).toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; ${Math.round((Date.now() - started) / 1000)} s in all.`,
    '',
    `A primary and one replica (redis-server on loopback ports, no persistence); ${args.commits} commits per variant and round, one at a time, ${args.rounds} rounds interleaved.`,
    '',
    table(
      ['variant', 'ack p50 ms', 'ack p99 ms', 'announced p50 ms', 'announced p99 ms'],
      [row(variants[0]!.name), row(variants[1]!.name)],
      ['l', 'r', 'r', 'r', 'r'],
    ),
    '',
    `The acknowledgement waits ${fmtMs(ack(variants[1]!.name) - ack(variants[0]!.name))} ms more at the median with the replica; readers hear of the change as early either way (the announcement goes out before the WAIT).`,
  ].join('\n');
  await publishReport('redis-wait', report, WRITE_DOC);
}

runMain(main);
