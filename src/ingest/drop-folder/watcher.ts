/**
 * Watches INBOX_DIR and queues one drop job per change. The kernel reports drops (inotify, through
 * one non-recursive fs.watch of the folder): a rename into the inbox is queued within a fraction
 * of a millisecond, each time, however soon after the previous drop of the same filename. Files
 * written in place are queued at once too (the publish step settles a drop still being written);
 * dotfiles, *.tmp and *.part are ignored.
 * With `ingest.poll` set, chokidar polls the folder instead, for folders whose writes raise no
 * kernel event (NFS or SMB shares written from other machines, some container bind mounts).
 * A periodic rescan catches what inotify dropped (it drops events silently on queue overflow) and
 * re-queues claims in .processing whose job was lost (a crash, a Redis restart), and rejected drops
 * whose writer went on writing (late-writes.ts).
 */
import { lstatSync, watch as fsWatch, type FSWatcher as FsWatcher } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { watch as chokidarWatch, type FSWatcher as ChokidarWatcher } from 'chokidar';
import type { Logger } from '../../log.js';
import { ensureInbox, isIgnoredName } from './inbox.js';
import { enqueueDrop, type IngestQueue } from '../queue.js';
import { checkLateWrites, type LateWriteDeps } from './late-writes.js';
import { recoverClaims } from './recovery.js';
import { ifExists } from '../../missing.js';

export interface WatcherDeps {
  readonly inboxDir: string;
  readonly queue: IngestQueue;
  readonly settleMs: number;
  /** Rejected drops' parked claims, watched for late writes on each rescan (late-writes.ts); none without it. */
  readonly lateWrites?: Pick<LateWriteDeps, 'rejectedDir' | 'watchMs' | 'forgetRejection'>;
  readonly rescanMs: number;
  /** 0: kernel events (fs.watch); otherwise chokidar polls the folder at this period. */
  readonly pollMs?: number;
  /** The lstat of a kernel event synchronous (default); false: on the thread pool (`ingest.sync_io_max_bytes: 0`). */
  readonly syncIo?: boolean;
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

  // A folder is never a drop: it stays where it is, and the operator is told once per start.
  const foldersSeen = new Set<string>();
  const folder = (name: string) => {
    if (foldersSeen.has(name) || foldersSeen.size > 10_000) return;
    foldersSeen.add(name);
    log.warn({ filename: name }, 'a folder in the inbox is not a drop; it is ignored (drop files, not folders)');
  };

  // One event per name that appeared or changed; a claim's rename out of the inbox fires one too,
  // so only names that exist are queued: one lstat, synchronous (on a local folder it takes
  // microseconds and a thread-pool hop more: src/sync-io.ts) unless synchronous I/O is off.
  const syncIo = deps.syncIo ?? true;
  const onStat = (name: string, st: { isDirectory(): boolean } | undefined) => {
    if (!st) return;
    if (st.isDirectory()) folder(name);
    else void queueDrop(name);
  };
  const onName = (name: string) => {
    if (isIgnoredName(name)) return;
    const path = join(inbox, name);
    if (!syncIo) {
      // Gone or unreadable: nothing to queue (the rescan retries what is there).
      void lstat(path).then(
        (st) => onStat(name, st),
        () => undefined,
      );
      return;
    }
    try {
      onStat(name, lstatSync(path, { throwIfNoEntry: false }));
    } catch {
      // unreadable: the rescan retries it
    }
  };

  let kernel: FsWatcher | undefined;
  let poller: ChokidarWatcher | undefined;
  const watchKernel = () => {
    try {
      kernel = fsWatch(inbox, { persistent: false }, (_event, name) => {
        if (name) onName(name);
      });
      kernel.on('error', (err) => {
        // The folder went away or the watch broke: the rescan watches it again.
        log.warn({ err: { message: err.message } }, 'watching the inbox failed; the rescan will watch it again');
        kernel?.close();
        kernel = undefined;
      });
    } catch (err) {
      log.warn({ err: { message: (err as Error).message } }, 'cannot watch the inbox (kernel events); relying on the rescan until it can');
      kernel = undefined;
    }
  };
  if (deps.pollMs) {
    poller = chokidarWatch(inbox, {
      depth: 0,
      ignoreInitial: true,
      followSymlinks: false,
      usePolling: true,
      interval: deps.pollMs,
      binaryInterval: deps.pollMs,
      ignored: (path: string) => path !== inbox && isIgnoredName(basename(path)),
    });
    const onPath = (path: string) => {
      if (resolve(path, '..') === inbox) void queueDrop(basename(path));
    };
    poller.on('add', onPath);
    poller.on('change', onPath);
    poller.on('addDir', (path: string) => {
      if (path !== inbox && resolve(path, '..') === inbox) folder(basename(path));
    });
    poller.on('error', (err) => log.error({ err: { message: (err as Error).message } }, 'watcher error'));
    await new Promise<void>((res) => poller!.once('ready', () => res()));
  } else {
    watchKernel();
  }

  let closed = false;
  let running: Promise<{ queued: number; recovered: number }> | undefined;
  const rescan = (minAgeMs = Math.max(deps.settleMs * 2, 500)) =>
    (running ??= (async () => {
      try {
        if (!poller && !kernel && !closed) watchKernel();
        const queued = await rescanInbox(inbox, minAgeMs, now, queueDrop, folder);
        const recovered =
          (await recoverClaims({ inboxDir: inbox, queue: deps.queue, log })) +
          (deps.lateWrites ? await checkLateWrites({ ...deps.lateWrites, inboxDir: inbox, queue: deps.queue, log }) : 0);
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
  // Every file already in the inbox, however young (its writes raised their events before we
  // watched), and the claims left over by a previous process, are queued at once.
  const ready = rescan(0).then(() => undefined);
  await ready;
  log.info({ inbox, mode: poller ? `poll every ${deps.pollMs} ms` : 'kernel events' }, 'watching the inbox');

  return {
    ready,
    rescan: () => rescan(),
    async close() {
      closed = true;
      clearInterval(timer);
      kernel?.close();
      await poller?.close();
      await running;
    },
  };
}

/** Queue every settled regular file in the inbox; the queue's deduplication absorbs repeats. */
async function rescanInbox(
  inbox: string,
  minAge: number,
  now: () => number,
  queueDrop: (name: string) => Promise<void>,
  folder: (name: string) => void,
): Promise<number> {
  const entries = await readdir(inbox, { withFileTypes: true });
  let queued = 0;
  for (const e of entries) {
    // Directories are never drops; symlinks, FIFOs and the like are claimed and rejected.
    if (isIgnoredName(e.name)) continue;
    if (e.isDirectory()) {
      folder(e.name);
      continue;
    }
    const st = await ifExists(lstat(join(inbox, e.name)));
    // Still being written in place: the watcher queues it when it settles.
    if (!st || now() - st.mtimeMs < minAge) continue;
    await queueDrop(e.name);
    queued++;
  }
  return queued;
}
