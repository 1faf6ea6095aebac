/**
 * Deltas: bytes sent per update of a live file where 5 % of the prices changed (JSON Merge Patch
 * and JSON Patch, raw and gzip, against the gzip whole file: goal ≤ 1/10), and the time to build
 * the patches of one pair as the reader does (parse both, src/reader/patches.ts: diff, check by
 * applying, canonical JSON), at 200 KB and 2 MB. In this process: patches are built by readers on
 * request, never on the publish path, so they do not touch freshness.
 */
import { gzipSync } from 'node:zlib';
import canonicalize from 'canonicalize';
import type { Json } from '../src/reader/merge-patch.js';
import { makePatches } from '../src/reader/patches.js';
import { EXAMPLE_FEEDS, generateDocument } from '../test/fixtures/corpus.js';
import { benchArgs, commandLine } from './lib/cli.js';
import { machineInfo, machineLine } from './lib/machine.js';
import { publishReport, table } from './lib/report.js';
import { log, runMain } from './lib/run.js';
import { median } from './lib/stats.js';

const args = benchArgs('Deltas: patch bytes per update against the gzip whole file, and the time to build a patch pair.', {
  rounds: { type: 'number', default: 30, quick: 5, description: 'builds timed per file size' },
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
  const p = makePatches(JSON.parse(a.toString()) as Json, to, canonicalize(to));
  if (p['json-patch'] === undefined || p['merge-patch'] === undefined) throw new Error('a patch did not rebuild the document');
  return { json: Buffer.from(JSON.stringify(p['json-patch'])), merge: Buffer.from(JSON.stringify(p['merge-patch'])) };
}

const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;

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
  ].join('\n');
  await publishReport('deltas', out, !args['no-doc'] && !args.quick);
}

runMain(main);
