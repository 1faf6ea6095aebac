/**
 * One `oddsfiles` child process (the built bin). Unlike test/helpers/service.ts, its JSON log
 * goes to a file and is read back on demand: a long bench logs a line per drop and per request,
 * more than is worth holding in memory. It also takes node options (--cpu-prof) and another bin.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { BIN, type LogLine } from '../../../test/helpers/service.js';

export type { LogLine };

export class OddsfilesProcess {
  readonly proc: ChildProcess;
  private offset = 0;
  private partial = '';
  private stderr = '';
  private exitCode: number | null | undefined;
  readonly exited: Promise<void>;

  constructor(
    env: Record<string, string>,
    args: string[],
    readonly logFile: string,
    /** Its roles, e.g. ['watcher', 'worker']. */
    readonly roles: readonly string[] = [],
    nodeArgs: readonly string[] = [],
    bin: string = BIN,
  ) {
    const fd = openSync(logFile, 'a');
    this.proc = spawn(process.execPath, [...nodeArgs, bin, ...args], { env, cwd: env.DATA_DIR, stdio: ['ignore', fd, 'pipe'] });
    closeSync(fd);
    this.proc.stderr!.setEncoding('utf8').on('data', (c: string) => (this.stderr = (this.stderr + c).slice(-4000)));
    this.exited = new Promise((r) =>
      this.proc.once('exit', (code) => {
        this.exitCode = code;
        r();
      }),
    );
  }

  get pid(): number {
    return this.proc.pid!;
  }

  /** New log lines since the last call whose raw text contains `needle` (a cheap pre-filter). */
  readLines(needle?: string): LogLine[] {
    const size = statSync(this.logFile).size;
    if (size <= this.offset) return [];
    const fd = openSync(this.logFile, 'r');
    const buf = Buffer.allocUnsafe(size - this.offset);
    try {
      readSync(fd, buf, 0, buf.length, this.offset);
    } finally {
      closeSync(fd);
    }
    this.offset = size;
    const lines = (this.partial + buf.toString('utf8')).split('\n');
    this.partial = lines.pop() ?? '';
    const out: LogLine[] = [];
    for (const l of lines) {
      if (needle !== undefined && !l.includes(needle)) continue;
      try {
        out.push(JSON.parse(l) as LogLine);
      } catch {
        /* not JSON */
      }
    }
    return out;
  }

  async waitForLine(pred: (l: LogLine) => boolean, needle: string, timeoutMs = 30_000): Promise<LogLine> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.readLines(needle).find(pred);
      if (hit) return hit;
      if (this.exitCode !== undefined) throw new Error(`oddsfiles exited (${this.exitCode}); stderr: ${this.stderr}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for "${needle}" in ${this.logFile}; stderr: ${this.stderr}`);
      await sleep(25);
    }
  }

  /** SIGTERM, then SIGKILL after `timeoutMs`. */
  async stop(timeoutMs = 15_000): Promise<void> {
    if (this.exitCode !== undefined) return;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), timeoutMs);
    await this.exited;
    clearTimeout(t);
  }
}
