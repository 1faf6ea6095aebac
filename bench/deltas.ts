/**
 * Deltas: bytes sent per update of a live file where 5 % of the prices changed (JSON Merge Patch and
 * JSON Patch, raw and gzip, against the gzip whole file), and the time to build a patch pair as the
 * reader does (parse both, diff, check by applying, canonical JSON). `--quick`: fewer rounds.
 * Freshness while clients ask for patches is not measured here: patches are built only by readers,
 * on request, never on the publish path.
 */
import { gzipSync } from 'node:zlib';
import canonicalize from 'canonicalize';
import jsonpatch from 'fast-json-patch';
import { applyMergePatch, createMergePatch, type Json } from '../src/reader/merge-patch.js';
import { EXAMPLE_FEEDS, generateDocument } from '../test/fixtures/corpus.js';

const quick = process.argv.includes('--quick');
const rounds = quick ? 5 : 30;
type Doc = { events: { markets: { selections: { odds: number }[] }[] }[] };

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

function build(a: Buffer, b: Buffer): { json: Buffer; merge: Buffer } {
  const from = JSON.parse(a.toString()) as Json;
  const to = JSON.parse(b.toString()) as Json;
  const target = canonicalize(to);
  const ops = jsonpatch.compare(from as object, to as object);
  if (canonicalize(jsonpatch.applyPatch(jsonpatch.deepClone(from), ops, false, true).newDocument) !== target) throw new Error('json patch check');
  const mp = createMergePatch(from, to);
  if (canonicalize(applyMergePatch(from, mp)) !== target) throw new Error('merge patch check');
  return { json: Buffer.from(JSON.stringify(ops)), merge: Buffer.from(JSON.stringify(mp)) };
}

const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
console.log(`| file | whole (gzip) | merge patch (raw / gzip) | JSON patch (raw / gzip) | JSON patch gzip / whole gzip | build a pair (median) |`);
console.log(`|---|--:|--:|--:|--:|--:|`);
for (const size of [200_000, 2_000_000]) {
  const { a, b } = pair(size);
  const times: number[] = [];
  let out = build(a, b);
  for (let r = 0; r < rounds; r++) {
    const t = performance.now();
    out = build(a, b);
    times.push(performance.now() - t);
  }
  times.sort((x, y) => x - y);
  const whole = gzipSync(b).length;
  const jg = gzipSync(out.json).length;
  console.log(
    `| ${kb(b.length)} | ${kb(whole)} | ${kb(out.merge.length)} / ${kb(gzipSync(out.merge).length)} | ${kb(out.json.length)} / ${kb(jg)} | 1/${(whole / jg).toFixed(0)} | ${times[times.length >> 1]!.toFixed(1)} ms |`,
  );
}
