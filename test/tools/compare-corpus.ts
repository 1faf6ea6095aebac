/**
 * Developer check (not part of the test suite): does test/fixtures/corpus.ts still produce the
 * cases of a real corpus folder?
 *
 *   npx tsx test/tools/compare-corpus.ts <path-to-corpus>
 *
 * Checks: the same cases and filenames, the same expected outcomes and reasons as its
 * EXPECTED.json, the project's validator gives each real file the same outcome as the generated
 * one (and the expected one), and the generated documents have the real ones' shape (layout,
 * top-level keys, event fields, markets, leagues, size). Exit 0 when all agree, 1 otherwise.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { isUtf8 } from 'node:buffer';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { loadConfig } from '../../src/config.js';
import { RejectionError } from '../../src/errors.js';
import { buildRegistry, parseFilename } from '../../src/feeds/registry.js';
import { createDocumentValidator } from '../../src/feeds/validate.js';
import { DEFAULT_GENERATED_AT, casePath, expectedManifest, generateCorpus, type FixtureCase } from '../fixtures/corpus.js';

const corpusDir = process.argv[2];
if (!corpusDir) {
  console.error('usage: npx tsx test/tools/compare-corpus.ts <path-to-corpus>');
  process.exit(2);
}

let failures = 0;
const fail = (what: string) => {
  failures++;
  console.log(`  FAIL ${what}`);
};

// --- the project's pipeline rules, with the embedded defaults -------------------------------
const scratch = mkdtempSync(join(tmpdir(), 'oddsfiles-compare-'));
const config = loadConfig({ env: {}, cwd: scratch });
rmSync(scratch, { recursive: true, force: true });
const registry = buildRegistry(config.bookmakers, config.sports);
const validate = createDocumentValidator(config.limits);
const now = new Date(Date.parse(DEFAULT_GENERATED_AT) + 60_000);

interface Outcome {
  outcome: 'published' | 'rejected';
  reason?: string;
  published?: Buffer;
  stamped?: boolean;
}

function drop(filename: string, bytes: Buffer): Outcome {
  const feed = parseFilename(registry, filename);
  if (!feed) return { outcome: 'rejected', reason: 'unknown_filename' };
  const bookmaker = registry.bookmakers.get(feed.bookmaker);
  if (!bookmaker) throw new Error(`registry has feed ${filename} but no bookmaker ${feed.bookmaker}`);
  try {
    const v = validate({ feed, bookmaker, bytes, receivedAt: now, now });
    return { outcome: 'published', published: v.bytes, stamped: v.stamped };
  } catch (err) {
    if (err instanceof RejectionError) return { outcome: 'rejected', reason: err.reason };
    throw err;
  }
}

const show = (o: Outcome) => (o.outcome === 'published' ? 'published' : `rejected(${o.reason})`);

// --- 1. EXPECTED.json -----------------------------------------------------------------------
const cases = generateCorpus();
const realExpected = JSON.parse(readFileSync(join(corpusDir, 'EXPECTED.json'), 'utf8')) as Record<string, Record<string, Record<string, unknown>>>;
const genExpected = expectedManifest(cases) as Record<string, Record<string, Record<string, unknown>>>;

console.log(`EXPECTED.json (${corpusDir})`);
for (const group of ['valid', 'edge', 'invalid'] as const) {
  const real = realExpected[group] ?? {};
  const gen = genExpected[group] ?? {};
  const missing = Object.keys(real).filter((k) => !(k in gen));
  const extra = Object.keys(gen).filter((k) => !(k in real));
  if (missing.length) fail(`${group}: not generated: ${missing.join(', ')}`);
  if (extra.length) fail(`${group}: generated but not in the corpus: ${extra.join(', ')}`);
  for (const [key, r] of Object.entries(real)) {
    const g = gen[key];
    if (!g) continue;
    for (const field of ['filename', 'outcome', 'reason', 'identical', 'note']) {
      if (JSON.stringify(r[field]) !== JSON.stringify(g[field])) {
        fail(`${group}/${key}: ${field} is ${JSON.stringify(g[field])}, the corpus says ${JSON.stringify(r[field])}`);
      }
    }
  }
  console.log(`  ${group}: ${Object.keys(real).length} in the corpus, ${Object.keys(gen).length} generated`);
}

// --- 2. files on disk -----------------------------------------------------------------------
function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}
const realFiles = new Set(
  walk(corpusDir)
    .map((p) => relative(corpusDir, p).split(sep).join('/'))
    .filter((p) => p !== 'EXPECTED.json'),
);
const genFiles = new Set(cases.map((c) => casePath(c).split(sep).join('/')));
console.log(`files: ${realFiles.size} in the corpus, ${genFiles.size} generated`);
for (const p of realFiles) if (!genFiles.has(p)) fail(`file not generated: ${p}`);
for (const p of genFiles) if (!realFiles.has(p)) fail(`generated file not in the corpus: ${p}`);

// --- 3. outcomes and shape, case by case ----------------------------------------------------
interface Shape {
  layout: string;
  topKeys?: string;
  eventKeys?: string;
  markets?: string;
  leagues?: string;
  events?: number;
}

function shapeOf(bytes: Buffer): Shape {
  const text = bytes.toString('utf8').replace(/^\uFEFF/, '');
  if (bytes.length === 0) return { layout: 'empty' };
  if (!isUtf8(bytes)) return { layout: 'not-utf8' };
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return { layout: 'not-json' };
  }
  const layout = /^[[{]\n {2}/.test(text) ? 'pretty' : 'compact';
  const record = doc && typeof doc === 'object' && !Array.isArray(doc) ? (doc as Record<string, unknown>) : undefined;
  const events = Array.isArray(doc) ? doc : record?.events;
  const shape: Shape = { layout, topKeys: record ? Object.keys(record).join(',') : Array.isArray(doc) ? '(array)' : typeof doc };
  if (Array.isArray(events)) {
    const evs = events as Record<string, unknown>[];
    const sorted = (s: Set<string>) => [...s].sort().join(' | ');
    shape.events = evs.length;
    shape.eventKeys = sorted(new Set(evs.map((e) => Object.keys(e).join(','))));
    shape.markets = sorted(
      new Set(evs.flatMap((e) => (Array.isArray(e.markets) ? (e.markets as Record<string, unknown>[]).map((m) => String(m.market)) : []))),
    );
    shape.leagues = sorted(new Set(evs.map((e) => String(e.league))));
  }
  return shape;
}

/** The one-field difference between two shapes that may differ (names drawn at random). */
function compareShapes(c: FixtureCase, real: Buffer, gen: Buffer): string[] {
  const r = shapeOf(real);
  const g = shapeOf(gen);
  const out: string[] = [];
  const strict: (keyof Shape)[] = ['layout', 'topKeys', 'eventKeys', 'markets'];
  // The unicode and extra-fields cases carry hand-made additions beyond the corpus's own.
  if (c.name === 'unicode-names' || c.name === 'extra-fields') strict.splice(strict.indexOf('eventKeys'), 1);
  for (const k of strict) if (r[k] !== g[k]) out.push(`${k}: real ${JSON.stringify(r[k])}, generated ${JSON.stringify(g[k])}`);
  if (c.name !== 'unicode-names' && g.leagues !== undefined) {
    const strange = g.leagues.split(' | ').filter((l) => !realLeagues.has(l));
    if (strange.length) out.push(`leagues found nowhere in the corpus: ${strange.join(', ')}`);
  }
  if (r.events !== undefined && g.events !== undefined && (g.events > r.events * 4 + 4 || g.events * 4 + 4 < r.events)) {
    out.push(`events: real ${r.events}, generated ${g.events}`);
  }
  if (gen.length > real.length * 4 + 1024 || gen.length * 4 + 1024 < real.length) {
    out.push(`size: real ${real.length} bytes, generated ${gen.length}`);
  }
  if (c.name === 'deep-nesting' || c.name === 'truncated-json' || c.name === 'not-utf8' || c.name === 'empty-file') {
    if (c.name === 'deep-nesting' && real.length !== gen.length) out.push(`size: real ${real.length} bytes, generated ${gen.length}`);
    if (c.name === 'truncated-json' && real.length !== gen.length) out.push(`size: real ${real.length} bytes, generated ${gen.length}`);
    if (!real.subarray(0, 24).equals(gen.subarray(0, 24))) out.push('the first bytes differ');
  }
  return out;
}

/** Drop the inserted `"generated_at":"…",` again: what is left must be the dropped bytes. */
function unstamp(published: Buffer): Buffer {
  return Buffer.from(published.toString('utf8').replace(/^(\s*\{)"generated_at":"[^"]*",?/, '$1'), 'utf8');
}

function checkOne(c: FixtureCase, label: 'real' | 'generated', bytes: Buffer, o: Outcome): string[] {
  const out: string[] = [];
  const e = c.expected;
  if (o.outcome !== e.outcome) out.push(`${label}: ${show(o)}, expected ${e.outcome}`);
  else if (e.outcome === 'rejected' && e.reason !== 'any' && o.reason !== e.reason) {
    out.push(`${label}: ${show(o)}, expected rejected(${e.reason})`);
  }
  if (o.published) {
    const identical = o.published.equals(bytes);
    if (e.identical === true && !identical) out.push(`${label}: published bytes differ from the drop`);
    if (c.name === 'utf8-bom' && !o.published.equals(bytes.subarray(3))) out.push(`${label}: not the drop less its BOM`);
    if (c.name === 'no-generated-at' && (!o.stamped || !unstamp(o.published).equals(bytes))) {
      out.push(`${label}: not the drop with generated_at stamped in`);
    }
  }
  return out;
}

/** Every league named anywhere in the real corpus (a small file may show only one of them). */
const realLeagues = new Set<string>();
for (const c of cases) {
  try {
    const leagues = shapeOf(readFileSync(join(corpusDir, casePath(c)))).leagues;
    if (leagues !== undefined && c.name !== 'unicode-names') for (const l of leagues.split(' | ')) realLeagues.add(l);
  } catch {
    // a missing file is reported below
  }
}

console.log('cases (outcome of the real file / of the generated file)');
for (const c of cases) {
  const path = join(corpusDir, casePath(c));
  let real: Buffer;
  try {
    real = readFileSync(path);
  } catch {
    fail(`${casePath(c)}: missing in the corpus`);
    continue;
  }
  const ro = drop(c.filename, real);
  const go = drop(c.filename, c.bytes);
  const problems = [
    ...checkOne(c, 'real', real, ro),
    ...checkOne(c, 'generated', c.bytes, go),
    ...(show(ro) !== show(go) ? [`outcomes differ: real ${show(ro)}, generated ${show(go)}`] : []),
    ...compareShapes(c, real, c.bytes),
  ];
  const label = `${c.group}/${c.group === 'valid' ? c.filename : `${c.name}/${c.filename}`}`;
  if (problems.length === 0) console.log(`  ok   ${label}: ${show(ro)} / ${show(go)}`);
  else {
    console.log(`  ---- ${label}: ${show(ro)} / ${show(go)}`);
    for (const p of problems) fail(p);
  }
}

console.log(failures === 0 ? `\nall ${cases.length} cases agree` : `\n${failures} problem(s)`);
process.exit(failures === 0 ? 0 : 1);
