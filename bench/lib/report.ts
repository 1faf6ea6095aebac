/** The reports: markdown tables, and each bench's generated block of docs/BENCHMARKS.md. */
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT } from '../../test/helpers/service.js';
import { log } from './run.js';

export const DOC_PATH = join(ROOT, 'docs/BENCHMARKS.md');

/**
 * Replace the generated block of section `name` (between `<!-- bench:NAME -->` and
 * `<!-- /bench:NAME -->`), or append it at the end; the prose around the markers is kept.
 */
export async function writeDocSection(name: string, markdown: string): Promise<void> {
  const start = `<!-- bench:${name} -->`;
  const end = `<!-- /bench:${name} -->`;
  const block = `${start}\n${markdown.trim()}\n${end}`;
  let doc = existsSync(DOC_PATH) ? await readFile(DOC_PATH, 'utf8') : '# Benchmarks\n';
  const i = doc.indexOf(start);
  const j = doc.indexOf(end);
  if (i >= 0 && j > i) doc = doc.slice(0, i) + block + doc.slice(j + end.length);
  else doc = `${doc.trimEnd()}\n\n${block}\n`;
  await writeFile(DOC_PATH, doc);
  log(`wrote the "${name}" results into ${DOC_PATH}`);
}

/** Print the report, and write it into docs/BENCHMARKS.md unless asked not to. */
export async function publishReport(name: string, markdown: string, writeDoc: boolean): Promise<void> {
  process.stdout.write(`\n${markdown}\n`);
  if (writeDoc) await writeDocSection(name, markdown);
  else log(`docs/BENCHMARKS.md left as it is (--no-doc or --quick)`);
}

export function table(header: readonly string[], rows: readonly (readonly string[])[], align?: readonly ('l' | 'r')[]): string {
  const a = align ?? header.map((_, i) => (i === 0 ? 'l' : 'r'));
  return [`| ${header.join(' | ')} |`, `|${a.map((x) => (x === 'l' ? '---' : '---:')).join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}
