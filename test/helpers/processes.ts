/**
 * Every process a test starts goes through spawnTracked / forkTracked: each child leads a process
 * group of its own (so whatever it starts, such as a private redis-server, is ended with it) and
 * is registered, so that it is ended even when the test fails:
 * - test/setup/processes.ts kills a failed test's processes after the test, and every process
 *   still running when its test file ends (failing a file that passed but left one behind);
 * - a record per process lives in a folder the global setup (test/setup/global-processes.ts)
 *   names, whose teardown kills and names whatever a worker could not end (a crashed worker);
 * - the worker's own exit kills what it still tracks.
 * Outside vitest (the benches) the same helpers work, with the exit hook only.
 */
import { fork, spawn, type ChildProcess, type ChildProcessByStdio, type ForkOptions, type SpawnOptions } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';

/** The folder of process records, set by the global setup for the workers. */
export const PROCESS_RECORDS_ENV = 'ODDSFILES_TEST_PROCESS_RECORDS';

export interface ProcessRecord {
  /** The child's pid, which is also its process group id. */
  readonly pid: number;
  /** What was started: the command line. */
  readonly label: string;
  /** The test file and test that started it (none outside vitest or outside a test). */
  readonly file?: string;
  readonly test?: string;
}

interface Tracked {
  readonly record: ProcessRecord;
  readonly child: ChildProcess;
}

const tracked = new Map<number, Tracked>();
let where: { file?: string; test?: string } = {};

/** test/setup/processes.ts says which file and test is running, so records name them. */
export function setCurrentTest(file: string | undefined, test: string | undefined): void {
  where = { ...(file ? { file } : {}), ...(test ? { test } : {}) };
}

function recordsDir(): string | undefined {
  const dir = process.env[PROCESS_RECORDS_ENV];
  return dir && existsSync(dir) ? dir : undefined;
}

function register(child: ChildProcess, label: string): ChildProcess {
  const pid = child.pid;
  // A spawn that failed (ENOENT) has no pid: there is nothing to end.
  if (pid === undefined) return child;
  const record: ProcessRecord = { pid, label, ...where };
  tracked.set(pid, { record, child });
  const dir = recordsDir();
  if (dir) writeFileSync(join(dir, `${pid}.json`), JSON.stringify(record));
  return child;
}

/** `spawn`, in a process group of its own, tracked until it and its group are gone. */
export function spawnTracked(
  command: string,
  args: readonly string[],
  options: SpawnOptions & { stdio: ['ignore', 'pipe', 'pipe'] },
): ChildProcessByStdio<null, Readable, Readable>;
export function spawnTracked(command: string, args: readonly string[], options?: SpawnOptions): ChildProcess;
export function spawnTracked(command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  return register(spawn(command, args, { ...options, detached: true }), [command, ...args].join(' ').slice(0, 200));
}

/** `fork`, in a process group of its own, tracked until it and its group are gone. */
export function forkTracked(modulePath: string, args: readonly string[], options: ForkOptions = {}): ChildProcess {
  return register(fork(modulePath, args, { ...options, detached: true }), [modulePath, ...args].join(' ').slice(0, 200));
}

/**
 * Whether any process of the group `pgid` is still running (zombies, which are only waiting to
 * be reaped, do not count). Reads /proc where there is one; elsewhere asks kill(-pgid, 0).
 */
export function groupAlive(pgid: number): boolean {
  if (existsSync('/proc/self/stat')) {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      } catch {
        continue;
      }
      // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ')'.
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(pgrp) === pgid && state !== 'Z') return true;
    }
    return false;
  }
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGCONT'); // a paused (SIGSTOP) process still dies of SIGKILL, but its children may wait on it
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // already gone
  }
}

async function waitGone(pgid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (groupAlive(pgid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
}

function forget(pid: number): void {
  tracked.delete(pid);
  const dir = recordsDir();
  if (dir) rmSync(join(dir, `${pid}.json`), { force: true });
}

/**
 * Ends the tracked processes `which` selects that still run (with their groups), and forgets
 * those already gone. Returns the records of those that were still running. `graceMs`: how long
 * a group that is ending by itself (its leader has exited) may take before it is killed.
 */
export async function endTracked(which: (r: ProcessRecord) => boolean = () => true, graceMs = 0): Promise<ProcessRecord[]> {
  const left: ProcessRecord[] = [];
  await Promise.all(
    [...tracked.values()]
      .filter((t) => which(t.record))
      .map(async ({ record }) => {
        if (graceMs > 0) await waitGone(record.pid, graceMs);
        if (groupAlive(record.pid)) {
          left.push(record);
          killGroup(record.pid);
          if (!(await waitGone(record.pid, 10_000))) return; // keep the record: the global teardown reports it
        }
        forget(record.pid);
      }),
  );
  return left;
}

export function describeRecord(r: ProcessRecord): string {
  const by = [r.file, r.test].filter(Boolean).join(' > ');
  return `pid ${r.pid} (${r.label})${by ? ` started by ${by}` : ''}`;
}

// The worker (or bench) exiting: kill whatever is tracked, synchronously.
process.once('exit', () => {
  for (const { record } of tracked.values()) if (groupAlive(record.pid)) killGroup(record.pid);
});
