/**
 * The static import graph of src/ and bin/ (type-only imports left out, as the compiler
 * erases them; `import()` left out, as it loads only when that code runs):
 * - it has no cycles;
 * - a process that runs only the reader, and the CLI that starts it, never load what the other
 *   roles need: BullMQ (about 15 MB of RSS), bull-board, chokidar, cli-progress, the document
 *   validator. Each is loaded by `import()` where a role or a command needs it (service.ts,
 *   ops/dashboard.ts, cli/publish.ts), and this test keeps a new static import from undoing it.
 *   A reader that takes PUT /v1/data (publish.http, the default) loads them on its first PUT, through
 *   service.ts's `import()` of src/ingest/http/http-publish.ts; one with publish.http off never does.
 * - no process loads typebox: the configuration is checked against the JSON schemas generated from it.
 * And, over every import (type-only and `import()` included), the subsystems keep their lanes:
 * the reader never imports ingest or ops, ingest never imports the reader or ops, ops never
 * imports ingest or the reader. They are wired by the composition root (service.ts) with plain
 * data and callbacks; an interface both sides of a boundary use lives in src/ports/; a type they
 * share belongs to a lower layer (src/feeds, src/catalog, ...).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/service.js';

/** Every module a source names: static imports and re-exports (type-only ones too), `import()`. */
const ANY_IMPORT = /^\s*(?:import|export)\s+(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;

/** `import x from '...'`, `import { a, type B } from '...'`, `export * from '...'`, `import '...'`; not `import type`/`export type`. */
const STATIC_IMPORT = /^\s*(?:import|export)\s+(?!type\s)(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm;

interface Node {
  readonly file: string;
  readonly locals: string[];
  readonly packages: string[];
}

const graph = new Map<string, Node>();

function load(file: string): Node {
  const known = graph.get(file);
  if (known) return known;
  const source = readFileSync(file, 'utf8');
  const node: Node = { file, locals: [], packages: [] };
  graph.set(file, node);
  for (const m of source.matchAll(STATIC_IMPORT)) {
    const spec = m[1]!;
    if (spec.startsWith('.')) node.locals.push(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
    else if (!spec.startsWith('node:')) node.packages.push(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
  }
  for (const dep of node.locals) load(dep);
  return node;
}

/** Every file reachable from the roots by static imports, with the path that first reached it. */
function reach(roots: string[]): Map<string, string[]> {
  const paths = new Map<string, string[]>();
  const queue = roots.map((r) => [r]);
  for (let path = queue.shift(); path; path = queue.shift()) {
    const file = path[path.length - 1]!;
    if (paths.has(file)) continue;
    paths.set(file, path);
    for (const dep of load(file).locals) queue.push([...path, dep]);
  }
  return paths;
}

const rel = (f: string) => relative(ROOT, f);
const src = (p: string) => join(ROOT, p);

/** Loaded only by the roles and commands that need them. */
const ROLE_PACKAGES = ['bullmq', '@bull-board/api', '@bull-board/fastify', 'chokidar', 'cli-progress'];
const ROLE_MODULES = [
  'src/feeds/validate.ts',
  'src/ingest/queue.ts',
  'src/ingest/worker.ts',
  'src/ingest/drop-folder/watcher.ts',
  'src/ingest/publish/publish.ts',
  'src/ingest/worker-role.ts',
  'src/ingest/http/http-publish.ts',
];

describe('the static import graph', () => {
  const entries = ['bin/oddsfiles.ts', 'src/reader/index.ts', 'src/ingest/worker-role.ts', 'src/ingest/drop-folder/watcher.ts'].map(src);
  reach(entries);

  it('reaches the modules it should (the parser sees the imports)', () => {
    const all = [...graph.keys()].map(rel);
    expect(all).toContain('src/service.ts');
    expect(all).toContain('src/reader/app.ts');
    expect(all).toContain('src/ingest/queue.ts');
    expect(load(src('src/ingest/queue.ts')).packages).toContain('bullmq');
    expect(graph.size).toBeGreaterThan(40);
  });

  it('has no cycles', () => {
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const stack: string[] = [];
    const visit = (file: string) => {
      state.set(file, 'open');
      stack.push(file);
      for (const dep of load(file).locals) {
        if (state.get(dep) === 'open') cycles.push([...stack.slice(stack.indexOf(dep)), dep].map(rel).join(' -> '));
        else if (!state.has(dep)) visit(dep);
      }
      stack.pop();
      state.set(file, 'done');
    };
    for (const file of graph.keys()) if (!state.has(file)) visit(file);
    expect(cycles).toEqual([]);
  });

  it('keeps BullMQ, bull-board, chokidar, cli-progress and the document validator out of a reader-only process and out of the CLI', () => {
    // What `oddsfiles start --roles reader` loads statically: the CLI, the service, the reader.
    const reached = reach([src('bin/oddsfiles.ts'), src('src/reader/index.ts')]);
    const offenders: string[] = [];
    for (const [file, path] of reached) {
      const how = path.map(rel).join(' -> ');
      if (ROLE_MODULES.includes(rel(file))) offenders.push(`${how}`);
      for (const pkg of load(file).packages) if (ROLE_PACKAGES.includes(pkg)) offenders.push(`${how} -> ${pkg}`);
    }
    expect(offenders).toEqual([]);
  });

  it('takes PUTs through a port: src/reader names src/ingest nowhere, and service.ts loads the ingest side with import() only', () => {
    const reader = reach([src('src/reader/index.ts')]);
    expect([...reader.keys()].map(rel)).toContain('src/reader/publishing/publish-route.ts');
    expect([...reader.keys()].map(rel).filter((f) => f.startsWith('src/ingest/'))).toEqual([]);
    expect([...reach([src('src/ingest/http/http-publish.ts')]).keys()].flatMap((f) => load(f).packages)).toContain('bullmq');
    const service = readFileSync(src('src/service.ts'), 'utf8');
    expect(service).toMatch(/import\('\.\/ingest\/http\/http-publish\.js'\)/);
    expect(load(src('src/service.ts')).locals.map(rel)).not.toContain('src/ingest/http/http-publish.ts');
  });

  it("keeps typebox (the config schemas' source, ~13 MB of RSS) out of every process: the service reads the JSON schemas generated from it", () => {
    const reached = reach([...entries, src('src/ingest/http/http-publish.ts'), src('src/ops/dashboard.ts'), src('src/cli/publish.ts')]);
    expect([...reached.keys()].map(rel)).toEqual(expect.arrayContaining(['src/config/env.ts', 'src/config/file-config.ts']));
    const offenders = [...reached].filter(([file]) => load(file).packages.includes('typebox')).map(([, path]) => path.map(rel).join(' -> '));
    expect(offenders).toEqual([]);
    // The schemas' source does load it (so the check is about something).
    expect(load(src('src/config/schema/file.ts')).packages).toContain('typebox');
  });

  it('does load them where the roles run (so the check above is about something)', () => {
    const worker = reach([src('src/ingest/worker-role.ts')]);
    expect([...worker.keys()].map(rel)).toEqual(expect.arrayContaining(['src/feeds/validate.ts', 'src/ingest/queue.ts', 'src/ingest/worker.ts']));
    expect(load(src('src/ingest/drop-folder/watcher.ts')).packages).toContain('chokidar');
  });
});

describe('the layers', () => {
  /** Every local module each .ts file under `dir` names, with any import (type-only included). */
  const importsUnder = (dir: string): [file: string, target: string][] => {
    const out: [string, string][] = [];
    for (const name of readdirSync(src(dir), { recursive: true }) as string[]) {
      if (!name.endsWith('.ts')) continue;
      const file = join(src(dir), name);
      for (const m of readFileSync(file, 'utf8').matchAll(ANY_IMPORT)) {
        const spec = (m[1] ?? m[2])!;
        if (spec.startsWith('.')) out.push([rel(file), rel(resolve(dirname(file), spec.replace(/\.js$/, '.ts')))]);
      }
    }
    return out;
  };

  it('sees every kind of import (so the check below is about something)', () => {
    const ops = importsUnder('src/ops');
    const ingest = importsUnder('src/ingest');
    // A value import, a type-only import, an import().
    expect(ops).toContainEqual(['src/ops/metrics-server.ts', 'src/ops/admin-guard.ts']);
    expect(ops).toContainEqual(['src/ops/metrics-server.ts', 'src/ops/metrics.ts']);
    expect(ingest).toContainEqual(['src/ingest/rejections/rejection-log.ts', 'src/ingest/rejections/rejected.ts']);
    expect(importsUnder('src')).toContainEqual(['src/service.ts', 'src/ingest/worker-role.ts']);
  });

  /** Which subsystems under src/ may name which (any import, type-only and `import()` included). */
  const FORBIDDEN: [from: string, to: string, why: string][] = [
    ['src/reader/', 'src/ingest/', 'PUT goes through the port in src/ports/publish.ts'],
    ['src/ingest/', 'src/reader/', 'the ingest side implements ports, it does not reach into the reader'],
    ['src/reader/', 'src/ops/', 'the composition root (service.ts) registers /metrics and the dashboard and passes the counters'],
    ['src/ops/', 'src/ingest/', 'both are fed plain data by service.ts'],
    ['src/ingest/', 'src/ops/', 'both are fed plain data by service.ts'],
    ['src/ops/', 'src/reader/', 'ops knows the reader only through what service.ts passes'],
    ['src/ports/', 'src/reader/', 'a port belongs to neither side'],
    ['src/ports/', 'src/ingest/', 'a port belongs to neither side'],
    ['src/ports/', 'src/ops/', 'a port belongs to neither side'],
  ];

  it.each(FORBIDDEN)('%s never imports %s (%s)', (from, to) => {
    const crossing = importsUnder(from)
      .filter(([, target]) => target.startsWith(to))
      .map(([file, target]) => `${file} -> ${target}`);
    expect(crossing).toEqual([]);
  });

  it('the ports are used from both sides (so the checks above are about something)', () => {
    expect(importsUnder('src/ingest')).toContainEqual(['src/ingest/http/http-publish.ts', 'src/ports/publish.ts']);
    expect(importsUnder('src/reader')).toContainEqual(['src/reader/publishing/publish-route.ts', 'src/ports/publish.ts']);
    expect(importsUnder('src/reader')).toContainEqual(['src/reader/limits/edge-report.ts', 'src/ports/route-labels.ts']);
    expect(importsUnder('src/ops')).toContainEqual(['src/ops/ops-plugin.ts', 'src/ports/route-labels.ts']);
  });
});
