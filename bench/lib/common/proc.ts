/** CPU time and memory of processes, from /proc (Linux). */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { memoryOf } from '../../../test/helpers/faults.js';

const CLK_TCK = clockTicks();

function clockTicks(): number {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
}

/**
 * CPU time of a process so far, ms, split into user space (JavaScript, V8, Node's C++, libuv)
 * and the kernel (system calls; on loopback the sender's call also does the receiver's TCP work).
 * NaN once the process is gone.
 */
export function cpuSplitMs(pid: number): { user: number; system: number } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After "(comm) ": utime and stime are the 12th and 13th fields.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { user: (Number(fields[11]) * 1000) / CLK_TCK, system: (Number(fields[12]) * 1000) / CLK_TCK };
  } catch {
    return { user: Number.NaN, system: Number.NaN };
  }
}

/**
 * CPU time of a process's live threads so far, ms, to the nanosecond (/proc/PID/task/TID/schedstat),
 * where /proc/PID/stat counts 10 ms ticks: for the little CPU of an idle process. Threads that
 * have ended are not counted. NaN once the process is gone.
 */
export function liveThreadsCpuMs(pid: number): number {
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        // the thread ended meanwhile
      }
    }
    return ns / 1e6;
  } catch {
    return Number.NaN;
  }
}

/** User + system CPU time of a process, ms; NaN once it is gone. */
export function cpuMs(pid: number): number {
  const { user, system } = cpuSplitMs(pid);
  return user + system;
}

/** User + system CPU time of a process's main thread (its event loop; worker threads, libuv's pool and V8's helpers left out), ms. */
export function loopCpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
  } catch {
    return Number.NaN;
  }
}

export const cpuMsOf = (pids: readonly number[]): number => pids.reduce((s, p) => s + cpuMs(p), 0);

/** VmRSS and VmHWM (peak RSS) in bytes. */
export function memOf(pid: number): { rss: number; hwm: number } {
  const m = memoryOf(pid);
  return { rss: m.rssMb * 2 ** 20, hwm: m.peakMb * 2 ** 20 };
}

/**
 * Wait until the processes stop using CPU (compression, manifest writes, GC after a round), so the
 * next measured round does not pay for the previous one: at most `maxMs`. The ms waited.
 */
export async function quiesce(pids: readonly number[], opts: { windowMs?: number; maxCpuMs?: number; maxMs?: number } = {}): Promise<number> {
  const windowMs = opts.windowMs ?? 200;
  const maxCpu = opts.maxCpuMs ?? 20;
  const started = Date.now();
  const deadline = started + (opts.maxMs ?? 5000);
  const total = () => pids.reduce((s, p) => s + (Number.isFinite(cpuMs(p)) ? cpuMs(p) : 0), 0);
  let before = total();
  for (;;) {
    await sleep(windowMs);
    const after = total();
    if (after - before <= maxCpu || Date.now() > deadline) return Date.now() - started;
    before = after;
  }
}
