/**
 * The reference for the change feed's fan-out: a bare node:http server of server-sent events
 * (fanout-child.mjs, in a process of its own), held open by the same stream clients as the
 * reader and written to at the same rate. What it costs per event written and per open stream is
 * the floor of any Node server on the machine at hand.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT } from '../../../test/helpers/service.js';
import { onCleanup } from '../common/run.js';

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'fanout-child.mjs');

export class BareFanout {
  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
  ) {}

  static async start(env: NodeJS.ProcessEnv = {}): Promise<BareFanout> {
    const child = spawn(process.execPath, [SCRIPT], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    onCleanup(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    });
    const port = await new Promise<number>((resolve, reject) => {
      child.once('message', (m: { port: number }) => resolve(m.port));
      child.once('exit', (code) => reject(new Error(`bare fan-out server exited (${code})`)));
    });
    return new BareFanout(child, `http://127.0.0.1:${port}`);
  }

  get pid(): number {
    return this.child.pid!;
  }

  private call<T>(msg: Record<string, unknown>): Promise<T> {
    return new Promise((resolve) => {
      this.child.once('message', (m: T) => resolve(m));
      this.child.send(msg);
    });
  }

  /** Its RSS and open streams now. */
  idle(): Promise<{ rss: number; streams: number }> {
    return this.call({ cmd: 'idle' });
  }

  /**
   * Write a `frameBytes` frame to every stream `rate` times a second for `seconds`, `perWrite` frames
   * joined per write; `writes` counts events, `fallbacks` the writes BARE_MODE=fd left to the stream.
   */
  run(
    rate: number,
    seconds: number,
    frameBytes: number,
    perWrite = 1,
  ): Promise<{ writes: number; cpuMs: number; userMs: number; systemMs: number; fallbacks: number; rssMax: number; streams: number }> {
    return this.call({ cmd: 'run', rate, seconds, frameBytes, perWrite });
  }

  stop(): void {
    this.child.kill('SIGTERM');
  }

  /** Stop it and wait until it has exited. */
  async end(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.stop();
    await exited;
  }
}
