/**
 * The production shape on one machine: each role of `oddsfiles start` in its own process, as
 * docker-compose.yml runs them (one watcher, N workers, M readers), all sharing one environment:
 * one REDIS_PREFIX, one INBOX_DIR and REJECTED_DIR, one store.
 */
import { startOddsfiles, type RunningOddsfiles } from './service.js';

export interface Cluster {
  readonly watcher: RunningOddsfiles;
  readonly workers: readonly RunningOddsfiles[];
  readonly readers: readonly RunningOddsfiles[];
  /** Every process, watcher first. */
  readonly all: readonly RunningOddsfiles[];
  /** SIGTERM to every process (watcher, then workers, then readers); resolves to their exit codes in `all` order. */
  stop(): Promise<(number | null)[]>;
  /** SIGKILL what is still running (for afterAll after a failure). */
  kill(): Promise<void>;
}

export interface ClusterOptions {
  readonly workers?: number;
  readonly readers?: number;
}

export async function startCluster(env: Record<string, string>, options: ClusterOptions = {}): Promise<Cluster> {
  const role = (r: string, extra: Record<string, string> = {}) => startOddsfiles({ ...env, ...extra }, ['start', '--roles', r]);
  const started = await Promise.allSettled([
    role('watcher'),
    ...Array.from({ length: options.workers ?? 2 }, () => role('worker')),
    // Each reader on a free port of its own.
    ...Array.from({ length: options.readers ?? 2 }, () => role('reader', { PORT: '0' })),
  ]);
  const procs = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await Promise.all(procs.map((p) => p.kill()));
    throw failed.reason;
  }
  const [watcher, ...rest] = procs as [RunningOddsfiles, ...RunningOddsfiles[]];
  const workers = rest.slice(0, options.workers ?? 2);
  const readers = rest.slice(workers.length);
  return {
    watcher,
    workers,
    readers,
    all: procs,
    async stop() {
      const watcherCode = await watcher.stop();
      const workerCodes = await Promise.all(workers.map((p) => p.stop()));
      const readerCodes = await Promise.all(readers.map((p) => p.stop()));
      return [watcherCode, ...workerCodes, ...readerCodes];
    },
    async kill() {
      await Promise.all(procs.map((p) => p.kill()));
    },
  };
}
