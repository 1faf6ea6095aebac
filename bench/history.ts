/**
 * History: the as-of lookup (GET /v1/history/{f}?at=...) over many versions of one file, through
 * HTTP against the real reader (`npm start`, every role in one process). The versions are made
 * fast by committing through the catalog directly (the commit script the workers run, history
 * index included), not by drops: the lookup is what is measured. Target: p99 ≤ 10 ms over
 * 10,000 versions. Reference in the same run: GET /v1/files with the same key (the cheapest /v1
 * answer: auth, rate and a memoised list).
 */
import { Redis } from 'ioredis';
import { createCatalog, type Catalog } from '../src/catalog/redis-catalog.js';
import { redisKeys } from '../src/redis/key-names.js';
import { benchArgs, commandLine } from './lib/common/cli.js';
import { machineInfo, machineLine } from './lib/common/machine.js';
import { OddsfilesSystem } from './lib/common/oddsfiles-system.js';
import { publishReport, table } from './lib/common/report.js';
import { log, runMain } from './lib/common/run.js';
import { fmtMs, median, nowMs, quantile } from './lib/common/stats.js';

const args = benchArgs('History: the as-of lookup over many versions of one file, through HTTP against the real reader.', {
  versions: { type: 'number', default: 10_000, quick: 10_000, description: 'versions of the file committed before measuring' },
  requests: { type: 'number', default: 5_000, quick: 300, description: 'as-of requests measured (one at a time), as many of the reference' },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});
const WRITE_DOC = !args['no-doc'] && !args.quick;
const FILE = 'site_live_northwind_soccer.json';
const TARGET_P99_MS = 10;

async function main(): Promise<void> {
  const started = Date.now();
  const machine = machineInfo();
  log(machineLine(machine));
  const sys = await OddsfilesSystem.start({
    label: 'history',
    shape: 'single',
    config: {
      plans: { pro: { allow: ['*'], rate: { max: 1_000_000_000, per: '1m' }, history: '30d' } },
      history: { retention: '30d', max_versions: Math.max(args.versions, 1) },
    },
  });
  const redis = new Redis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379');
  const catalog = createCatalog(redis, redisKeys(sys.prefix), undefined, { retentionMs: 30 * 86_400_000, maxVersions: args.versions });
  const { t0, commitMs } = await commitVersions(catalog);
  const { asOf, ref } = await measureLookups(sys, t0);
  redis.disconnect();
  await sys.stop();
  await publishReport('history', report(machine, started, commitMs, asOf, ref), WRITE_DOC);
}

/** `--versions` versions of one file, one a second of simulated time ending now; 64 commits in flight at a time. */
async function commitVersions(catalog: Catalog): Promise<{ t0: number; commitMs: number }> {
  const t0 = Date.now() - args.versions * 1000;
  const made = nowMs();
  const sha = (n: number) => n.toString(16).padStart(16, '0').repeat(4);
  for (let i = 0; i < args.versions; i += 64) {
    const batch = [];
    for (let n = i; n < Math.min(args.versions, i + 64); n++) {
      const ms = t0 + n * 1000;
      batch.push(
        catalog.commit(
          {
            filename: FILE,
            bookmaker: 'northwind',
            kind: 'live',
            sport: 'soccer',
            object: `objects/${FILE}/${sha(n)}.json`,
            sha256: sha(n),
            size: 1000,
            generatedAt: new Date(ms).toISOString(),
            generatedAtMs: ms,
            publishedAt: new Date(ms).toISOString(),
          },
          1,
        ),
      );
    }
    await Promise.all(batch);
  }
  const commitMs = nowMs() - made;
  log(`${args.versions} versions committed in ${fmtMs(commitMs)} ms`);

  return { t0, commitMs };
}

/** A warm-up, then interleaved: an as-of lookup at a random moment, then the reference. */
async function measureLookups(sys: OddsfilesSystem, t0: number): Promise<{ asOf: number[]; ref: number[] }> {
  const base = sys.readerUrl!;
  const headers = { 'x-api-key': sys.key };
  const time = async (path: string) => {
    const s = nowMs();
    const res = await fetch(`${base}${path}`, { headers });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
    return nowMs() - s;
  };
  for (let i = 0; i < 50; i++) await time('/v1/files');
  const asOf: number[] = [];
  const ref: number[] = [];
  for (let i = 0; i < args.requests; i++) {
    const at = new Date(t0 + Math.floor(Math.random() * args.versions * 1000)).toISOString();
    asOf.push(await time(`/v1/history/${FILE}?at=${at}`));
    ref.push(await time('/v1/files'));
  }
  return { asOf, ref };
}

function report(machine: ReturnType<typeof machineInfo>, started: number, commitMs: number, asOf: number[], ref: number[]): string {
  const p99 = quantile(asOf, 0.99);
  const row = (name: string, v: number[]) => [name, fmtMs(median(v)), fmtMs(quantile(v, 0.9)), fmtMs(quantile(v, 0.99)), fmtMs(Math.max(...v))];
  return [
    machineLine(machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; ${Math.round((Date.now() - started) / 1000)} s in all.`,
    '',
    `${args.versions} versions of one file committed through the catalog in ${fmtMs(commitMs)} ms; ${args.requests} requests of each kind, one at a time, interleaved, over HTTP/1.1 keep-alive.`,
    '',
    table(
      ['request', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms'],
      [row('GET /v1/history/{f}?at=…', asOf), row('GET /v1/files (reference)', ref)],
      ['l', 'r', 'r', 'r', 'r'],
    ),
    '',
    `As-of p99 ${fmtMs(p99)} ms: target ≤ ${TARGET_P99_MS} ms ${p99 <= TARGET_P99_MS ? 'met' : 'NOT met'}.`,
  ].join('\n');
}

runMain(main);
