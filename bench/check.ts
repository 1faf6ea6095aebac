/**
 * The document check on its own, on the built code: how fast a worker's validator
 * (dist/src/feeds/validate.js) checks a drop, against JSON.parse alone and JSON.parse + ajv on the
 * same bytes; and whether it stays that fast through quiet spells and right after a start.
 *
 * Speed: an indented and a compact drop of the example registry, interleaved rounds (order
 * shuffled per round), medians.
 *
 * Quiet spells: in a fresh Node process per checker, drops checked one at a time `--gap-ms` apart
 * with garbage made between them and a full collection in every tenth gap (what the memory reducer
 * of a quiet worker does). Three checkers: a new scanner per drop (V8 may drop a short-lived
 * scanner's optimized code in a pause, and the next drop is then checked in the interpreter), the
 * validator with its one scanner for every drop (the path of drops of 1 MiB and more), and the
 * validator as a worker has it (JSON.parse + ajv below 1 MiB). Reported: the first three checks
 * after the start, then the median, the largest and how many took over 5× the median.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as ConfigModule from '../src/config.js';
import type * as RegistryModule from '../src/feeds/registry.js';
import type * as ValidateModule from '../src/feeds/validate.js';
import { EXAMPLE_FEEDS, generateDocument } from '../test/fixtures/corpus.js';
import { ROOT } from '../test/helpers/service.js';
import { benchArgs, commandLine } from './lib/common/cli.js';
import { machineInfo, machineLine } from './lib/common/machine.js';
import { publishReport, table } from './lib/common/report.js';
import { log, runMain, tempDir } from './lib/common/run.js';
import { fmtMs, fmtX, median, quantile, shuffle } from './lib/common/stats.js';

const args = benchArgs('The document check: speed against JSON.parse and JSON.parse + ajv, and through quiet spells.', {
  kb: { type: 'number', default: 200, quick: 20, description: 'size of the drops checked, KiB' },
  rounds: { type: 'number', default: 7, quick: 2, description: 'interleaved rounds of the speed part' },
  spaced: { type: 'number', default: 60, quick: 12, description: 'drops checked one at a time per checker in the quiet-spell part' },
  'gap-ms': { type: 'number', default: 150, quick: 20, description: 'pause between two drops of the quiet-spell part, ms' },
  'no-doc': { type: 'boolean', description: 'print the report only; leave docs/benchmarks/ as it is' },
});
const KB = args.kb;
const ROUNDS = args.rounds;
const SPACED = args.spaced;
const GAP_MS = args['gap-ms'];
const WRITE_DOC = !args['no-doc'] && !args.quick;
const DIST = join(ROOT, 'dist/src');

type Validate = (bytes: Buffer) => unknown;

/** JSON values (keys included): what the check steps through. */
function tokens(bytes: Buffer): number {
  let n = 0;
  const walk = (v: unknown): void => {
    n++;
    if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object') {
      for (const [, x] of Object.entries(v)) {
        n++;
        walk(x);
      }
    }
  };
  walk(JSON.parse(bytes.toString('utf8')));
  return n;
}

/** The worker's validators, from dist/, for the example feed `filename`. */
async function validators(filename: string): Promise<{ onePass: Validate; ajv: Validate }> {
  const { loadConfig } = (await import(pathToFileURL(join(DIST, 'config.js')).href)) as typeof ConfigModule;
  const { buildRegistry, parseFilename } = (await import(pathToFileURL(join(DIST, 'feeds/registry.js')).href)) as typeof RegistryModule;
  const { createDocumentValidator } = (await import(pathToFileURL(join(DIST, 'feeds/validate.js')).href)) as typeof ValidateModule;
  const config = loadConfig({ env: {}, cwd: await tempDir('check-config') });
  const registry = buildRegistry(config.bookmakers, config.sports);
  const feed = parseFilename(registry, filename)!;
  const bookmaker = registry.bookmakers.get(feed.bookmaker)!;
  const check = (v: ReturnType<typeof createDocumentValidator>): Validate => {
    return (bytes) => v({ feed, bookmaker, bytes, receivedAt: new Date(), now: new Date() });
  };
  return {
    onePass: check(createDocumentValidator({ ...config.limits, onePassMinBytes: 0 })),
    ajv: check(createDocumentValidator({ ...config.limits, onePassMinBytes: Infinity })),
  };
}

/** Mean ms per call of `fn` over `n` calls in a row (one round; the caller takes the median of rounds). */
function timeOnce(fn: () => unknown, n: number): number {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) fn();
  return (performance.now() - t0) / n;
}

/** The child of the quiet-spell part: prints one JSON line of check times (ms). */
const SPACED_SCRIPT = `
import { readFileSync } from 'node:fs';
const [dist, docPath, variant, count, gap] = process.argv.slice(2);
const { compileSchemaPlan } = await import(dist + '/feeds/schema-plan.js');
const { scanDocument } = await import(dist + '/feeds/scan.js');
const { createDocumentValidator, loadDocumentSchema } = await import(dist + '/feeds/validate.js');
const plan = compileSchemaPlan(loadDocumentSchema()).plan;
const fields = ['bookmaker', 'sport', 'generated_at'];
const template = readFileSync(docPath);
const limits = { maxFileBytes: 64 << 20, futureSkewMs: 60_000, maxDepth: 64 };
// The validator's own check on a drop: a feed whose checks after the schema always pass.
const feed = { filename: 'x.json', bookmaker: 'northwind', kind: 'live', sport: null };
const bookmaker = { key: 'northwind', name: 'Northwind' };
let check;
if (variant === 'new') check = (b) => scanDocument(b, 0, plan, 64, fields);
else {
  const v = createDocumentValidator(variant === 'scanner' ? { ...limits, onePassMinBytes: 0 } : limits);
  check = (b) => { try { v({ feed, bookmaker, bytes: b, receivedAt: new Date(), now: new Date() }); } catch {} };
}
const times = [];
let junk = [];
for (let k = 0; k < Number(count); k++) {
  for (let j = 0; j < 2000; j++) junk.push({ j, s: 'x' + j });
  if (junk.length > 50_000) junk = [];
  // Every tenth gap, a full collection: what the memory reducer of a quiet worker does at some
  // point in a pause; left to the memory reducer alone, a short run may see none.
  if (k % 10 === 9) globalThis.gc();
  const bytes = Buffer.from(template); // a drop of its own, as read from its claim
  const t = performance.now();
  check(bytes);
  times.push(performance.now() - t);
  await new Promise((r) => setTimeout(r, Number(gap)));
}
process.stdout.write(JSON.stringify(times) + '\\n');
`;

async function spaced(dir: string, docPath: string, variant: 'new' | 'scanner' | 'default'): Promise<number[]> {
  const script = join(dir, 'spaced.mjs');
  await writeFile(script, SPACED_SCRIPT);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', script, DIST, docPath, variant, String(SPACED), String(GAP_MS)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as number[]) : reject(new Error(`spaced ${variant}: exit ${code}`))));
  });
}

type Doc = { readonly label: string; readonly bytes: Buffer };

async function main(): Promise<void> {
  const machine = machineInfo();
  log(machineLine(machine));
  const started = Date.now();
  const live = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_northwind_soccer.json')!;
  const docs: Doc[] = [
    { label: `indented (${live.filename})`, bytes: generateDocument(live, { targetBytes: KB * 1024, pretty: true }) },
    { label: `compact (${live.filename})`, bytes: generateDocument(live, { targetBytes: KB * 1024, pretty: false }) },
  ];
  const { onePass, ajv } = await validators(live.filename);
  const speedRows = measureSpeed(docs, onePass, ajv);
  const spacedRows = await measureSpaced(docs[0]!);
  await publishReport('check', report(machine, started, speedRows, spacedRows), WRITE_DOC);
}

/** Each document through the one pass, JSON.parse and JSON.parse + ajv, interleaved rounds. */
function measureSpeed(docs: readonly Doc[], onePass: Validate, ajv: Validate): string[][] {
  const speedRows: string[][] = [];
  for (const doc of docs) {
    const n = tokens(doc.bytes);
    const calls = Math.max(5, Math.round(60_000 / (doc.bytes.length / 1024)));
    const systems: Record<string, () => unknown> = {
      onePass: () => onePass(doc.bytes),
      parse: () => JSON.parse(doc.bytes.toString('utf8')),
      ajv: () => ajv(doc.bytes),
    };
    const ms: Record<string, number[]> = { onePass: [], parse: [], ajv: [] };
    for (const name of Object.keys(systems)) timeOnce(systems[name]!, calls); // warm-up
    for (let r = 0; r < ROUNDS; r++) for (const name of shuffle(Object.keys(systems))) ms[name]!.push(timeOnce(systems[name]!, calls));
    const m = (k: string) => median(ms[k]!);
    log(`${doc.label}: one pass ${fmtMs(m('onePass'))} ms, JSON.parse ${fmtMs(m('parse'))} ms, JSON.parse + ajv ${fmtMs(m('ajv'))} ms`);
    speedRows.push([
      doc.label,
      `${(doc.bytes.length / 1024).toFixed(0)} KB`,
      String(n),
      fmtMs(m('onePass')),
      ((m('onePass') * 1e6) / n).toFixed(0),
      fmtMs(m('parse')),
      fmtMs(m('ajv')),
      fmtX(m('onePass') / m('parse')),
      fmtX(m('onePass') / m('ajv')),
    ]);
  }

  return speedRows;
}

/** Checks after quiet spells, each checker in a fresh Node process. */
async function measureSpaced(doc: Doc): Promise<string[][]> {
  const dir = await tempDir('check-spaced');
  const docPath = join(dir, 'drop.json');
  await writeFile(docPath, doc.bytes);
  const variants = [
    { id: 'new', label: 'a new scanner per drop' },
    { id: 'scanner', label: "one scanner for every drop (the validator's, forced to one pass)" },
    { id: 'default', label: 'the validator as a worker has it (JSON.parse + ajv below 1 MiB)' },
  ] as const;
  const spacedRows: string[][] = [];
  for (const v of variants) {
    const times = await spaced(dir, docPath, v.id);
    const rest = times.slice(5);
    const p50 = median(rest);
    const slow = rest.filter((t) => t > 5 * p50).length;
    log(`${v.label}: first ${times.slice(0, 3).map(fmtMs).join(', ')} ms; then p50 ${fmtMs(p50)}, max ${fmtMs(Math.max(...rest))}, ${slow} over 5× p50`);
    spacedRows.push([
      v.label,
      times
        .slice(0, 3)
        .map((t) => fmtMs(t))
        .join(', '),
      fmtMs(p50),
      fmtMs(quantile(rest, 0.9)),
      fmtMs(Math.max(...rest)),
      `${slow} of ${rest.length}`,
    ]);
  }

  return spacedRows;
}

function report(machine: ReturnType<typeof machineInfo>, started: number, speedRows: string[][], spacedRows: string[][]): string {
  return [
    machineLine(machine),
    '',
    `Run: ${new Date().toISOString().slice(0, 16)}Z, \`${commandLine(args)}\`; ${Math.round((Date.now() - started) / 1000)} s in all.`,
    '',
    `Speed: the worker's validator (one pass) against \`JSON.parse\` alone and the JSON.parse + ajv path on the same bytes, ${ROUNDS} interleaved rounds, medians (ms per drop); tokens: JSON values and keys.`,
    '',
    table(
      ['drop', 'size', 'tokens', 'one pass ms', 'ns / token', 'JSON.parse ms', 'JSON.parse + ajv ms', 'one pass / JSON.parse', 'one pass / JSON.parse + ajv'],
      speedRows,
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    ),
    '',
    `Quiet spells: ${SPACED} indented drops checked one at a time ${GAP_MS} ms apart, garbage made between them and a full collection (\`gc()\`) in every tenth gap, each checker in a fresh Node process; "then": the checks after the fifth.`,
    '',
    table(['checker', 'first three checks ms', 'then p50 ms', 'p90 ms', 'max ms', 'over 5× p50'], spacedRows, ['l', 'l', 'r', 'r', 'r', 'r']),
  ].join('\n');
}

runMain(main);
