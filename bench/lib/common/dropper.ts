/**
 * Background drops while a bench measures: bench/lib/common/dropper-child.ts in a child process (so the
 * measuring loop never waits behind it), driven over IPC.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FixtureFeed } from '../../../test/fixtures/corpus.js';
import { ROOT } from '../../../test/helpers/service.js';
import { onCleanup } from './run.js';

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'dropper-child.ts');

export class Dropper {
  private constructor(private readonly child: ChildProcess) {}

  /** A dropper of new versions of `feeds`, `bytes` each, idle until begin(). */
  static async start(feeds: readonly FixtureFeed[], bytes: number): Promise<Dropper> {
    const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT], {
      cwd: ROOT,
      env: { ...process.env, DROPPER: JSON.stringify({ feeds, bytes }) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    // A send after the clean-up disconnected it (a run stopped mid-block) must not crash the
    // bench before its other clean-ups stop the systems.
    child.on('error', () => undefined);
    onCleanup(async () => {
      if (child.connected) child.disconnect();
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    });
    await new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code) => reject(new Error(`dropper exited (${code})`)));
    });
    return new Dropper(child);
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Drop `rate` files per second into `inbox`, round-robin over the feeds. */
  begin(inbox: string, rate: number): void {
    this.child.send({ cmd: 'start', inbox, rate });
  }

  /** Stop dropping: how many were dropped over how many ms. */
  end(): Promise<{ sent: number; ms: number }> {
    if (!this.child.connected) return Promise.resolve({ sent: 0, ms: 0 });
    return new Promise((resolve) => {
      const on = (m: { stopped?: boolean; sent: number; ms: number }) => {
        if (!m.stopped) return;
        this.child.off('message', on);
        resolve({ sent: m.sent, ms: m.ms });
      };
      this.child.on('message', on);
      this.child.send({ cmd: 'stop' });
    });
  }
}
