/**
 * The bare reference pipeline (bench/lib/bare/pipeline.ts) in a child process: the architecture of
 * oddsfiles reduced to the work it cannot avoid, the reference of the freshness figures.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TEST_REDIS_URL } from '../../../test/helpers/redis.js';
import { ROOT } from '../../../test/helpers/service.js';
import { benchPrefix, onCleanup, tempDir } from '../common/run.js';

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'pipeline.ts');

export class BareSystem {
  readonly kind = 'bare';
  readonly key = 'bare-key';
  readerUrl = '';
  private proc: ChildProcess | undefined;

  private constructor(
    readonly label: string,
    readonly dataDir: string,
    readonly prefix: string,
  ) {}

  get inbox(): string {
    return join(this.dataDir, 'inbox');
  }

  get channel(): string {
    return `${this.prefix}:bare:changes`;
  }

  get catalogKey(): string {
    return `${this.prefix}:bare:catalog`;
  }

  pids(): number[] {
    return this.proc?.pid ? [this.proc.pid] : [];
  }

  /** `queue`: its file events go through a BullMQ queue, taken at this concurrency (pipeline.ts). */
  static async start(label: string, opts: { queue?: number } = {}): Promise<BareSystem> {
    const dataDir = await tempDir(label);
    const prefix = benchPrefix(label);
    const sys = new BareSystem(label, dataDir, prefix);
    onCleanup(() => sys.stop());
    await mkdir(join(dataDir, 'inbox', '.processing'), { recursive: true });
    const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT], {
      cwd: ROOT,
      env: { ...process.env, BARE: JSON.stringify({ dataDir, prefix, redisUrl: TEST_REDIS_URL, key: sys.key, ...opts }) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    sys.proc = child;
    // Its first line on stdout: {"url": ...} once it listens.
    sys.readerUrl = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout!.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        const line = out.split('\n').find((l) => l.startsWith('{'));
        if (line) resolve((JSON.parse(line) as { url: string }).url);
      });
      child.once('exit', (code) => reject(new Error(`bare pipeline exited (${code})`)));
    });
    return sys;
  }

  async drained(): Promise<boolean> {
    const inbox = (await readdir(this.inbox)).filter((n) => !n.startsWith('.') && !n.endsWith('.tmp'));
    if (inbox.length > 0) return false;
    return (await readdir(join(this.inbox, '.processing'))).length === 0;
  }

  async stop(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    p.kill('SIGTERM');
    await new Promise((r) => p.once('exit', r));
  }
}
