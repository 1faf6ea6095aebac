/**
 * Deltas: bytes sent per update of a live file where 5 % of the prices changed (JSON Merge Patch
 * and JSON Patch, raw and gzip, against the gzip whole file: goal ≤ 1/10), and the time to build
 * the patches of one pair as the reader does (parse both, src/reader/deltas/patches.ts: diff, check by
 * applying, canonical JSON), at 200 KB and 2 MB, in this process. Then freshness with clients
 * asking for patches: an oddsfiles process, a new version of a 200 KB live file renamed into its
 * inbox each round, rename → first GET serving it, in rounds alternating between no patch clients
 * and clients asking continually for the JSON Patch from three versions back (each new version
 * makes the reader build a new pair).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import type { Json } from '../src/reader/deltas/merge-patch.js';
import { makePatches } from '../src/reader/deltas/patches.js';
import { EXAMPLE_FEEDS, generateDocument } from '../test/fixtures/corpus.js';
import { benchArgs, commandLine } from './lib/common/cli.js';
import { docTemplate } from './lib/common/drops.js';
import { machineInfo, machineLine } from './lib/common/machine.js';
import { OddsfilesSystem } from './lib/common/oddsfiles-system.js';
import { Poller } from './lib/common/poller.js';
import { dropAndPoll } from './lib/common/rounds.js';
import { publishReport, table } from './lib/common/report.js';
import { log, runMain } from './lib/common/run.js';
import { fmtMs, median, quantile } from './lib/common/stats.js';

const args = benchArgs('Deltas: patch bytes per update against the gzip whole file, and the time to build a patch pair.', {
  rounds: { type: 'number', default: 30, quick: 5, description: 'builds timed per file size' },
  drops: { type: 'number', default: 40, quick: 6, description: 'measured versions per condition in the freshness part' },
  clients: { type: 'number', default: 4, quick: 2, description: 'patch clients in the freshness part' },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});
type Doc = { events: { markets: { selections: { odds: number }[] }[] }[] };

/** A live document of about `targetBytes`, and the same with every 20th price moved. */
function pair(targetBytes: number): { a: Buffer; b: Buffer } {
  const a = generateDocument(
    EXAMPLE_FEEDS.find((f) => f.kind === 'live')!,
    { targetBytes },
  );
  const doc = JSON.parse(a.toString()) as Doc;
  let i = 0;
  for (const e of doc.events) for (const m of e.markets) for (const s of m.selections) if (i++ % 20 === 0) s.odds = Math.round(s.odds * 100 + 7) / 100;
  return { a, b: Buffer.from(JSON.stringify(doc, null, 2)) };
}

/** What a reader does for one pair (but compressing, which the report measures on its own). */
function build(a: Buffer, b: Buffer): { json: Buffer; merge: Buffer } {
  const to = JSON.parse(b.toString()) as Json;
  const p = makePatches(JSON.parse(a.toString()) as Json, to);
  if (p['json-patch'] === undefined || p['merge-patch'] === undefined) throw new Error('a patch did not rebuild the document');
  return { json: Buffer.from(JSON.stringify(p['json-patch'])), merge: Buffer.from(JSON.stringify(p['merge-patch'])) };
}

const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;

/** rename → first GET serving the new version, alternating rounds without and with patch clients. */
async function freshness(): Promise<{ quiet: number[]; patching: number[]; patches: number }> {
  const sys = await OddsfilesSystem.start({ label: 'deltas', shape: 'single' });
  const feed = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_northwind_soccer.json')!;
  const template = docTemplate(feed, 200 * 1024);
  const poller = new Poller(sys.readerUrl!, sys.key);
  const etags: string[] = [];
  const next = async () => {
    const r = await dropAndPoll(sys, poller, template, etags.at(-1));
    etags.push(r.etag);
    return r.fresh;
  };
  for (let i = 0; i < 4; i++) await next();
  let patching = false;
  let stop = false;
  let patches = 0;
  const url = `${sys.readerUrl}/v1/data/${feed.filename}`;
  const clients = Array.from({ length: args.clients }, async () => {
    while (!stop) {
      if (!patching) {
        await sleep(5);
        continue;
      }
      const res = await fetch(url, {
        headers: { 'x-api-key': sys.key, 'a-im': 'json-patch', 'if-none-match': etags[Math.max(0, etags.length - 3)]!, 'accept-encoding': 'gzip' },
      });
      await res.arrayBuffer();
      if (res.status === 226) patches++;
    }
  });
  const out = { quiet: [] as number[], patching: [] as number[] };
  for (let round = 0; round < args.drops; round++) {
    for (const c of round % 2 === 0 ? (['quiet', 'patching'] as const) : (['patching', 'quiet'] as const)) {
      patching = c === 'patching';
      await sleep(50);
      out[c].push(await next());
    }
  }
  stop = true;
  await Promise.all(clients);
  poller.close();
  await sys.stop();
  return { ...out, patches };
}

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const rows: string[][] = [];
  let worst = 0;
  for (const size of [200_000, 2_000_000]) {
    const { a, b } = pair(size);
    let out = build(a, b);
    const times: number[] = [];
    for (let r = 0; r < args.rounds; r++) {
      const t = performance.now();
      out = build(a, b);
      times.push(performance.now() - t);
    }
    const whole = gzipSync(b).length;
    const jg = gzipSync(out.json).length;
    worst = Math.max(worst, jg / whole);
    rows.push([
      kb(b.length),
      kb(whole),
      `${kb(out.merge.length)} / ${kb(gzipSync(out.merge).length)}`,
      `${kb(out.json.length)} / ${kb(jg)}`,
      `1/${(whole / jg).toFixed(0)}`,
      `${median(times).toFixed(1)} ms`,
    ]);
    log(`${kb(b.length)}: JSON patch gzip 1/${(whole / jg).toFixed(0)} of the gzip whole file; build ${median(times).toFixed(1)} ms`);
  }
  const f = await freshness();
  const pct = (v: number[]) => `${fmtMs(median(v))} / ${fmtMs(quantile(v, 0.99))} ms`;
  log(`freshness: without patch clients ${pct(f.quiet)}, with ${pct(f.patching)}`);
  const out = [
    machineLine(machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; generated live documents, every 20th price moved (5 %); build times are medians of ${args.rounds}.`,
    '',
    table(['file', 'whole (gzip)', 'merge patch (raw / gzip)', 'JSON patch (raw / gzip)', 'JSON patch gzip / whole gzip', 'build a pair (median)'], rows, [
      'l',
      'r',
      'r',
      'r',
      'r',
      'r',
    ]),
    '',
    `JSON patch (gzip) against the gzip whole file: at most 1/${(1 / worst).toFixed(0)}; goal ≤ 1/10 ${worst <= 0.1 ? 'met' : 'NOT met'}. A merge patch replaces the \`events\` array whole: about the gzip whole file.`,
    '',
    table(
      ['freshness (rename → first GET, 200 KB, one process)', 'p50 / p99', 'target'],
      [
        ['no patch clients', pct(f.quiet), 'p50 ≤ 15 / p99 ≤ 50 ms'],
        [`${args.clients} clients asking for patches (${f.patches} patches served)`, pct(f.patching), 'p50 ≤ 15 / p99 ≤ 50 ms'],
      ],
      ['l', 'r', 'l'],
    ),
    '',
    `${args.drops} versions per condition, the conditions alternating round by round.`,
  ].join('\n');
  await publishReport('deltas', out, !args['no-doc'] && !args.quick);
}

runMain(main);
