/**
 * Runs the real `oddsfiles` command (the built bin, dist/bin/oddsfiles.js) as a child
 * process, as a user would, and reads its JSON log lines.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onJsonLines } from './json-lines.js';
import { spawnTracked } from './processes.js';

export const ROOT = resolve(fileURLToPath(import.meta.url), '../../..');
export const BIN = join(ROOT, 'dist/bin/oddsfiles.js');

export type LogLine = Record<string, unknown> & { msg?: string; level?: number };

export interface RunningOddsfiles {
  readonly proc: ChildProcess;
  readonly logs: LogLine[];
  /** The reader's base URL (when the reader role runs). */
  readonly url: string | undefined;
  /** Everything written to stderr so far. */
  stderr(): string;
  waitForLog(pred: (l: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** SIGTERM and wait for the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL: no cleanup at all. */
  kill(): Promise<void>;
}

export async function makeDataDir(label: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `oddsfiles-${label}-`));
}

export function baseEnv(dataDir: string, prefix: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of ['PATH', 'HOME', 'TMPDIR', 'LANG']) if (process.env[k]) env[k] = process.env[k]!;
  return {
    ...env,
    DATA_DIR: dataDir,
    REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
    REDIS_PREFIX: prefix,
    PORT: '0',
    LOG_LEVEL: 'info',
    ...extra,
  };
}

/** `cpus`: the CPUs the process may run on (`taskset -c`, which then execs it: the same process), to be a machine of that many cores. */
export async function startOddsfiles(env: Record<string, string>, args: string[] = ['start'], opts: { cpus?: string } = {}): Promise<RunningOddsfiles> {
  const [cmd, argv] = opts.cpus === undefined ? [process.execPath, [BIN, ...args]] : ['taskset', ['-c', opts.cpus, process.execPath, BIN, ...args]];
  const proc = spawnTracked(cmd, argv, { env, cwd: env.DATA_DIR, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: LogLine[] = [];
  const waiters = new Set<() => void>();
  let stderr = '';
  onJsonLines<LogLine>(
    proc.stdout!,
    (line) => ({ msg: line }),
    (l) => {
      logs.push(l);
      waiters.forEach((w) => w());
    },
  );
  proc.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<number | null>((res) => proc.once('exit', (code) => res(code)));

  const waitForLog = (pred: (l: LogLine) => boolean, timeoutMs = 20_000) =>
    new Promise<LogLine>((res, rej) => {
      const check = () => {
        const hit = logs.find(pred);
        if (hit) {
          cleanup();
          res(hit);
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        rej(new Error(`timed out waiting for a log line; stderr: ${stderr.slice(-2000)}; last logs: ${JSON.stringify(logs.slice(-5))}`));
      }, timeoutMs);
      const onExit = () => {
        cleanup();
        rej(new Error(`oddsfiles exited; stderr: ${stderr.slice(-2000)}`));
      };
      const cleanup = () => {
        clearTimeout(timer);
        waiters.delete(check);
        proc.off('exit', onExit);
      };
      waiters.add(check);
      proc.once('exit', onExit);
      check();
    });

  let started: LogLine;
  try {
    started = await waitForLog((l) => l.msg === 'oddsfiles started', 30_000);
  } catch (err) {
    // A service that did not start is not left running (it may hold a port, or its queue jobs).
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGKILL');
      await exited;
    }
    throw err;
  }
  return {
    proc,
    logs,
    url: started.reader as string | undefined,
    stderr: () => stderr,
    waitForLog,
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      proc.kill('SIGTERM');
      return exited;
    },
    async kill() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGKILL');
      await exited;
    },
  };
}

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs in DATA_DIR unless `cwd` says where (a relative DATA_DIR is resolved against it). */
export function runCli(env: Record<string, string>, args: string[], timeoutMs = 60_000, cwd = env.DATA_DIR): Promise<CliResult> {
  return new Promise((resolvePromise, reject) => {
    const proc = spawnTracked(process.execPath, [BIN, ...args], { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    proc.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`oddsfiles ${args.join(' ')} timed out; stderr: ${stderr}`));
    }, timeoutMs);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout, stderr });
    });
  });
}

/** Poll until fn returns a truthy value. */
export async function waitFor<T>(
  fn: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 20_000,
  what = 'condition',
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
