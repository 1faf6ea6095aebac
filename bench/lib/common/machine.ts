/** The machine, the tools' versions and the commit measured: the first line of every report. */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism, cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../../../test/helpers/service.js';

export interface MachineInfo {
  readonly nproc: number;
  readonly cpu: string;
  readonly ramGiB: number;
  readonly node: string;
  readonly redis: string;
  readonly nginx: string;
  readonly wrk: string;
  readonly load: string;
  /** The commit measured, and whether src/ or bin/ differ from it. */
  readonly code: string;
}

/** The path of a command on PATH (or /usr/sbin, /sbin, where nginx lives), or undefined. */
export function which(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/sbin'])) {
    const p = join(dir, cmd);
    if (dir && existsSync(p)) return p;
  }
  return undefined;
}

export function machineInfo(): MachineInfo {
  const model = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? cpus()[0]?.model ?? 'unknown';
  return {
    nproc: availableParallelism(),
    cpu: model,
    ramGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    redis: (versionOf('redis-server', ['--version']) ?? 'redis-server not on PATH').replace(/ sha=.*$/, ''),
    nginx: versionOf('nginx', ['-v']) ?? 'nginx not installed',
    wrk: versionOf('wrk', ['-v'])?.replace(/ \[.*$/, '') ?? 'wrk not installed',
    load: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
    code: codeVersion(),
  };
}

export function machineLine(m: MachineInfo): string {
  return `Code: ${m.code} (dist/ built from it). Machine: \`nproc\` = ${m.nproc}, ${m.cpu}, ${m.ramGiB} GiB RAM; Node ${m.node}, ${m.redis}, ${m.nginx}, ${m.wrk}; load average at start ${m.load}.`;
}

/** `abc1234`, plus a note when src/ or bin/ have uncommitted changes (the bench runs dist/). */
function codeVersion(): string {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout?.trim() || 'unknown';
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'src', 'bin'], { cwd: ROOT, encoding: 'utf8' }).stdout?.trim();
  return dirty ? `${head} + uncommitted changes in src/` : head;
}

/** First line a command prints about its version (nginx -v writes to stderr, wrk -v exits 1). */
function versionOf(cmd: string, args: string[]): string | undefined {
  const bin = which(cmd);
  if (!bin) return undefined;
  const r = spawnSync(bin, args, { encoding: 'utf8' });
  return `${r.stdout ?? ''}\n${r.stderr ?? ''}`
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l.length > 0);
}
