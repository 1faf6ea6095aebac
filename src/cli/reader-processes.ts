/**
 * `oddsfiles start --roles reader --processes N`: N reader processes on one port, so that one
 * machine's cores all serve. Each is `oddsfiles start --roles reader` of its own, listening with
 * SO_REUSEPORT (the kernel spreads new connections over them); this process only supervises:
 * it starts them (the first picks the port when PORT is 0, the others take it), starts again
 * one that exits, passes SIGINT/SIGTERM on and waits for them. A reader process whose supervisor
 * is gone stops by itself (its IPC channel closes). Each keeps its own state; the limits that
 * must hold across readers (plan rates, streams per key) are counted in Redis already.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { UsageError } from '../errors.js';
import type { Logger } from '../log.js';

/** The message a reader process started under a supervisor sends it. */
export interface ReaderStarted {
  readonly oddsfiles: 'started';
  readonly reader: string;
}

export function isReaderStarted(m: unknown): m is ReaderStarted {
  return typeof m === 'object' && m !== null && (m as ReaderStarted).oddsfiles === 'started' && typeof (m as ReaderStarted).reader === 'string';
}

/** `--processes`: a whole number from 1 to 256, or `auto` (the cores this process may use). */
export function parseProcesses(text: string): number {
  if (text === 'auto') return availableParallelism();
  const n = /^\d{1,3}$/.test(text) ? Number(text) : Number.NaN;
  if (!(n >= 1 && n <= 256)) throw new UsageError(`--processes takes a whole number from 1 to 256, or auto; got ${text}`);
  return n;
}

/** Several processes on one port need SO_REUSEPORT's spreading of connections: Linux, Node ≥ 22.12. */
export function checkReusePort(platform: string, nodeVersion: string): void {
  const [major, minor] = nodeVersion.replace(/^v/, '').split('.').map(Number) as [number, number];
  if (platform !== 'linux') throw new UsageError(`--processes above 1 needs Linux (SO_REUSEPORT); this is ${platform}`);
  if (major < 22 || (major === 22 && minor < 12) || (major === 23 && minor < 1))
    throw new UsageError(`--processes above 1 needs Node 22.12 or later (listen's reusePort); this is ${nodeVersion}`);
}

export interface ReaderProcessesDeps {
  readonly count: number;
  /** The `oddsfiles` script and the arguments of one reader process. */
  readonly script: string;
  readonly args: readonly string[];
  /** The environment of every reader process; `envFor` adds what differs (PORT, METRICS_PORT). */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly envFor: (index: number, port: number | undefined) => Record<string, string>;
  readonly log: Logger;
  /** Wait before starting again a process that exited. */
  readonly restartDelayMs?: number;
}

export interface ReaderProcesses {
  /** The shared address, once every process listens. */
  readonly url: string;
  readonly pids: () => number[];
  /** SIGTERM to each, resolved when all have exited. */
  stop(signal: NodeJS.Signals): Promise<void>;
}

export async function startReaderProcesses(deps: ReaderProcessesDeps): Promise<ReaderProcesses> {
  const { log } = deps;
  const children: (ChildProcess | undefined)[] = Array.from({ length: deps.count });
  let port: number | undefined;
  let url = '';
  let stopping = false;

  /** Start process `i`; resolves with its URL once it listens, rejects if it exits first. */
  const launch = (i: number): Promise<string> => {
    const child = fork(deps.script, [...deps.args], { env: { ...deps.env, ...deps.envFor(i, port) }, stdio: 'inherit' });
    children[i] = child;
    const started = new Promise<string>((resolve, reject) => {
      child.on('message', (m) => {
        if (isReaderStarted(m)) resolve(m.reader);
      });
      child.once('exit', (code, signal) => reject(new Error(`reader process ${i} exited before it listened (${signal ?? `code ${code}`})`)));
    });
    child.once('exit', (code, signal) => {
      if (children[i] === child) children[i] = undefined;
      if (stopping) return;
      log.warn({ pid: child.pid, index: i, code, signal }, 'reader process exited: starting another');
      const t = setTimeout(() => {
        if (stopping) return;
        launch(i).then(
          (u) => log.info({ pid: children[i]?.pid, index: i, reader: u }, 'reader process started'),
          (err: Error) => log.error({ err: { message: err.message }, index: i }, 'reader process did not start'),
        );
      }, deps.restartDelayMs ?? 1000);
      t.unref();
    });
    return started;
  };

  try {
    // The first process picks the port when none is set; the others share it.
    url = await launch(0);
    port = Number(new URL(url).port);
    log.info({ pid: children[0]?.pid, index: 0, reader: url }, 'reader process started');
    await Promise.all(
      children.slice(1).map(async (_c, j) => {
        const u = await launch(j + 1);
        log.info({ pid: children[j + 1]?.pid, index: j + 1, reader: u }, 'reader process started');
      }),
    );
  } catch (err) {
    stopping = true;
    await stopAll(children, 'SIGTERM');
    throw err;
  }

  return {
    url,
    pids: () => children.flatMap((c) => (c?.pid === undefined ? [] : [c.pid])),
    async stop(signal) {
      stopping = true;
      await stopAll(children, signal);
    },
  };
}

async function stopAll(children: readonly (ChildProcess | undefined)[], signal: NodeJS.Signals): Promise<void> {
  await Promise.all(
    children.map((c) => {
      if (!c || c.exitCode !== null || c.signalCode !== null) return undefined;
      const exited = new Promise((resolve) => c.once('exit', resolve));
      c.kill(signal);
      return exited;
    }),
  );
}
