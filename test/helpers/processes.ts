/**
 * Every process a test starts goes through spawnTracked / forkTracked: each child leads a process
 * group of its own (so whatever it starts, such as a private redis-server, is ended with it) and
 * is registered, so that it is ended even when the test fails:
 * - test/setup/processes.ts kills a failed test's processes after the test, and every process
 *   still running when its test file ends (failing a file that passed but left one behind);
 * - a record per process lives in a folder the global setup (test/setup/global-processes.ts)
 *   names, whose teardown kills and names whatever a worker could not end (a crashed worker);
 * - the worker's own exit kills what it still tracks.
 * A group is signalled only while it is provably the child's (its leader with the recorded start
 * time, or a process left in it when the leader exited): pids are reused, and a bare
 * `kill(-pid)` after the group is gone could end an unrelated process group.
 * Outside vitest (the benches) the same helpers work, with the exit hook only.
 */
import { fork, spawn, type ChildProcess, type ChildProcessByStdio, type ForkOptions, type SpawnOptions } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
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
  /** The child's start time (/proc/<pid>/stat), so that a later process given the same pid is not taken for it. */
  readonly start?: string;
  /** Once the child has exited: the processes left in its group then (pid and start time). */
  readonly members?: readonly Member[];
}

interface Member {
  readonly pid: number;
  readonly start: string;
}

interface Tracked {
  record: ProcessRecord;
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

const HAVE_PROC = existsSync('/proc/self/stat');

interface Stat {
  readonly pid: number;
  readonly state: string;
  readonly pgrp: number;
  readonly start: string;
}

function readStat(pid: number): Stat | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // pid (comm) state ppid pgrp ... starttime (field 22): comm may hold spaces and parentheses.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { pid, state: f[0]!, pgrp: Number(f[2]), start: f[19]! };
}

/** The running (not zombie) processes of group `pgid`. */
function groupMembers(pgid: number): Stat[] {
  const out: Stat[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const st = readStat(Number(entry));
    if (st && st.pgrp === pgid && st.state !== 'Z') out.push(st);
  }
  return out;
}

/**
 * Whether the group the record names still runs, and is the one the child led: its leader with
 * the recorded start time, or one of the processes left in it when the leader exited. (Pids are
 * reused: a group is never signalled on its id alone, which may by then name another process's.)
 * Without /proc, only a child that has not exited is known to be ours.
 */
export function running(record: ProcessRecord, exited = record.members !== undefined): boolean {
  if (!HAVE_PROC) {
    if (exited) return false;
    try {
      process.kill(-record.pid, 0);
      return true;
    } catch {
      return false;
    }
  }
  return groupMembers(record.pid).some(
    (p) => (p.pid === record.pid && p.start === record.start) || (record.members ?? []).some((m) => m.pid === p.pid && m.start === p.start),
  );
}

/** SIGKILL to the record's group, if it is still the child's. */
export function killRecorded(record: ProcessRecord): void {
  if (!running(record)) return;
  try {
    process.kill(-record.pid, 'SIGCONT'); // a paused (SIGSTOP) process dies of SIGKILL too, but its children may wait on it
    process.kill(-record.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

function save(record: ProcessRecord): void {
  const dir = recordsDir();
  if (!dir) return;
  // Whole or not at all: the global teardown may read it after this worker died.
  writeFileSync(join(dir, `.${record.pid}.tmp`), JSON.stringify(record));
  renameSync(join(dir, `.${record.pid}.tmp`), join(dir, `${record.pid}.json`));
}

function forget(pid: number): void {
  tracked.delete(pid);
  const dir = recordsDir();
  if (dir) rmSync(join(dir, `${pid}.json`), { force: true });
}

function register(child: ChildProcess, label: string): ChildProcess {
  const pid = child.pid;
  // A spawn that failed (ENOENT) has no pid: there is nothing to end.
  if (pid === undefined) return child;
  const start = HAVE_PROC ? readStat(pid)?.start : undefined;
  const t: Tracked = { record: { pid, label, ...where, ...(start ? { start } : {}) }, child };
  tracked.set(pid, t);
  save(t.record);
  // Right when the child is reaped (its pid is free again): note what is left of its group, or
  // forget it when nothing is.
  child.once('exit', () => {
    const members = HAVE_PROC ? groupMembers(pid).map((p) => ({ pid: p.pid, start: p.start })) : [];
    if (members.length === 0) {
      forget(pid);
      return;
    }
    t.record = { ...t.record, members };
    save(t.record);
  });
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

async function waitGone(record: ProcessRecord, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (running(record)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
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
      .map(async (t) => {
        if (graceMs > 0) await waitGone(t.record, graceMs);
        if (running(t.record)) {
          left.push(t.record);
          killRecorded(t.record);
          if (!(await waitGone(t.record, 10_000))) return; // keep the record: the global teardown reports it
        }
        forget(t.record.pid);
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
  for (const { record } of tracked.values()) killRecorded(record);
});
