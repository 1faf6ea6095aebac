/**
 * Watches INBOX_DIR with chokidar and queues one drop job per change. Files written in place are
 * queued at once (a drop still being written in place is settled by the publish step); dotfiles,
 * *.tmp and *.part are ignored.
 * A periodic rescan catches what inotify dropped (it drops events silently on queue overflow) and
 * re-queues claims in .processing whose job was lost (a crash, a Redis restart).
 */
import { watch as fsWatch, type FSWatcher as FsWatcher } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { watch, type FSWatcher } from 'chokidar';
import type { Logger } from '../log.js';
import { ensureInbox, isIgnoredName } from './inbox.js';
import { enqueueDrop, type IngestQueue } from './queue.js';
import { recoverClaims } from './recovery.js';

export interface WatcherDeps {
  readonly inboxDir: string;
  readonly queue: IngestQueue;
  readonly settleMs: number;
  readonly rescanMs: number;
  readonly log: Logger;
  readonly now?: () => number;
}

export interface InboxWatcher {
  /** Resolves once the initial scan is done and every file present at start is queued. */
  readonly ready: Promise<void>;
  /** One full pass now (also run every rescanMs). */
  rescan(): Promise<{ queued: number; recovered: number }>;
  close(): Promise<void>;
}

export async function startWatcher(deps: WatcherDeps): Promise<InboxWatcher> {
  const inbox = resolve(deps.inboxDir);
  const now = deps.now ?? Date.now;
  await ensureInbox(inbox);
  const log = deps.log.child({ role: 'watcher' });

  const queueDrop = (name: string) =>
    enqueueDrop(deps.queue, name, now()).catch((err: unknown) =>
      // Redis away: the rescan queues it again once Redis is back.
      log.warn({ filename: name, err: { message: (err as Error).message } }, 'could not queue a drop; the rescan will retry'),
    );

  const watcher: FSWatcher = watch(inbox, {
    depth: 0,
    ignoreInitial: false,
    followSymlinks: false,
    ignored: (path: string) => path !== inbox && isIgnoredName(basename(path)),
    // No awaitWriteFinish: it delays every drop, renamed ones included, by at least `settle`
    // (measured: 52 ms of an 83 ms freshness). The publish step settles a drop written in place
    // instead, only when it does not validate (publish.ts, readSettled).
  });
  const onFile = (path: string) => {
    if (resolve(path, '..') !== inbox) return;
    void queueDrop(basename(path));
  };
  watcher.on('add', onFile);
  watcher.on('change', onFile);
  // A folder is never a drop: it stays where it is, and the operator is told once per start.
  watcher.on('addDir', (path: string) => {
    if (path === inbox || resolve(path, '..') !== inbox) return;
    log.warn({ filename: basename(path) }, 'a folder in the inbox is not a drop; it is ignored (drop files, not folders)');
  });
  watcher.on('error', (err) => log.error({ err: { message: (err as Error).message } }, 'watcher error'));
  const ready = new Promise<void>((res) => watcher.once('ready', () => res()));

  // chokidar throttles repeated events for one path (~50 ms): a drop renamed in right after the
  // previous one of the same name was claimed was missed 42 % of the time and waited for the
  // rescan (bench/freshness.ts). The kernel's own event (inotify, via fs.watch) catches those;
  // the queue's per-filename deduplication absorbs the double adds. Only names that exist and are
  // not folders are queued (a claim's rename out of the inbox fires an event too).
  const raw: FsWatcher = fsWatch(inbox, { persistent: false }, (_event, name) => {
    if (!name || isIgnoredName(name)) return;
    void lstat(join(inbox, name)).then(
      (st) => (st.isDirectory() ? undefined : queueDrop(name)),
      () => undefined,
    );
  });
  raw.on('error', (err) => log.warn({ err: { message: err.message } }, 'fs.watch error; chokidar and the rescan go on'));

  let closed = false;
  let running: Promise<{ queued: number; recovered: number }> | undefined;
  const rescan = () =>
    (running ??= (async () => {
      try {
        const queued = await rescanInbox(inbox, deps.settleMs, now, queueDrop);
        const recovered = await recoverClaims({ inboxDir: inbox, queue: deps.queue, log });
        if (queued + recovered > 0) log.debug({ queued, recovered }, 'rescan');
        return { queued, recovered };
      } catch (err) {
        log.warn({ err: { message: (err as Error).message } }, 'rescan failed; will try again');
        return { queued: 0, recovered: 0 };
      } finally {
        running = undefined;
      }
    })());

  const timer = setInterval(() => {
    if (!closed) void rescan();
  }, deps.rescanMs);
  timer.unref();
  await ready;
  // Claims left over by a previous process are queued again at once.
  await rescan();
  log.info({ inbox }, 'watching the inbox');

  return {
    ready,
    rescan,
    async close() {
      closed = true;
      clearInterval(timer);
      raw.close();
      await watcher.close();
      await running;
    },
  };
}

/** Queue every settled regular file in the inbox; the queue's deduplication absorbs repeats. */
async function rescanInbox(inbox: string, settleMs: number, now: () => number, queueDrop: (name: string) => Promise<void>): Promise<number> {
  const entries = await readdir(inbox, { withFileTypes: true });
  let queued = 0;
  const minAge = Math.max(settleMs * 2, 500);
  for (const e of entries) {
    // Directories are never drops; symlinks, FIFOs and the like are claimed and rejected.
    if (e.isDirectory() || isIgnoredName(e.name)) continue;
    const st = await lstat(join(inbox, e.name)).catch(() => undefined);
    // Still being written in place: the watcher queues it when it settles.
    if (!st || now() - st.mtimeMs < minAge) continue;
    await queueDrop(e.name);
    queued++;
  }
  return queued;
}
