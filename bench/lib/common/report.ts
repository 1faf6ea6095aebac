/**
 * The reports: markdown tables, and each bench's full report in docs/benchmarks/NAME.md (one file
 * per bench, replaced on every run: the history is in git). docs/BENCHMARKS.md holds only the
 * summary against the targets, written by hand from these.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT } from '../../../test/helpers/service.js';
import { log } from './run.js';

export const REPORT_DIR = join(ROOT, 'docs/benchmarks');

/** Write the full report of bench `name` to docs/benchmarks/NAME.md. */
export async function writeReport(name: string, markdown: string): Promise<void> {
  await mkdir(REPORT_DIR, { recursive: true });
  const path = join(REPORT_DIR, `${name}.md`);
  await writeFile(
    path,
    `# Benchmark: ${name}\n\nWritten by \`bench/\`; see [BENCHMARKS.md](../BENCHMARKS.md) for how to run it and the targets.\n\n${markdown.trim()}\n`,
  );
  log(`wrote the "${name}" report to ${path}`);
}

/** Print the report, and write it to docs/benchmarks/ unless asked not to. */
export async function publishReport(name: string, markdown: string, writeDoc: boolean): Promise<void> {
  process.stdout.write(`\n${markdown}\n`);
  if (writeDoc) await writeReport(name, markdown);
  else log('docs/benchmarks/ left as it is (--no-doc or --quick)');
}
export function table(header: readonly string[], rows: readonly (readonly string[])[], align?: readonly ('l' | 'r')[]): string {
  const a = align ?? header.map((_, i) => (i === 0 ? 'l' : 'r'));
  return [`| ${header.join(' | ')} |`, `|${a.map((x) => (x === 'l' ? '---' : '---:')).join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}
