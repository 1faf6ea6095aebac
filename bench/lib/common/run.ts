/**
 * How a bench runs: its main with clean-up on success, failure and SIGINT/SIGTERM (children
 * stopped before their Redis keys go), temp folders under os.tmpdir(), a unique Redis prefix,
 * and progress lines on stderr (stdout carries the report).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dropPrefix, uniquePrefix as testPrefix } from '../../../test/helpers/redis.js';

const cleanups: (() => Promise<unknown>)[] = [];

/** Run at exit, last registered first. */
export function onCleanup(fn: () => Promise<unknown>): void {
  cleanups.push(fn);
}

async function runCleanups(): Promise<void> {
  while (cleanups.length > 0) {
    const fn = cleanups.pop()!;
    await fn().catch((err: unknown) => process.stderr.write(`cleanup: ${(err as Error).message}\n`));
  }
}

export function runMain(main: () => Promise<void>): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) process.exit(130);
    stopping = true;
    process.stderr.write(`\n${signal}: cleaning up…\n`);
    void runCleanups().finally(() => process.exit(130));
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
  main()
    .catch((err: unknown) => {
      process.stderr.write(`bench: ${(err as Error).stack ?? String(err)}\n`);
      process.exitCode = 1;
    })
    .finally(() => void runCleanups().finally(() => setTimeout(() => process.exit(), 100).unref()));
}

/** A Redis prefix of its own, removed at the end. */
export function benchPrefix(label: string): string {
  const prefix = testPrefix(`bench-${label}`);
  onCleanup(() => dropPrefix(prefix));
  return prefix;
}

export async function tempDir(label: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `oddsfiles-bench-${label}-`));
  // BENCH_KEEP=1 keeps the folders (logs, stores, profiles) for a look after the run.
  if (process.env.BENCH_KEEP === '1') log(`keeping ${dir} (BENCH_KEEP=1)`);
  else onCleanup(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

export function log(msg: string): void {
  process.stderr.write(`${new Date().toISOString().slice(11, 23)} ${msg}\n`);
}
