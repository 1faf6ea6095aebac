/**
 * The hold of the change feed: changes read from the log wait here until this reader holds their
 * version (or a newer one), so a client that GETs the file on hearing of it gets that version.
 * They leave in order; the head waits at most `holdTimeoutMs`, then is handed on anyway.
 */
import type { LoggedChange } from '../../catalog/change-log.js';
import type { PublishedCache } from '../data/cache.js';
import { supersedes } from '../data/version.js';

export interface HoldDeps {
  readonly published: PublishedCache;
  readonly holdTimeoutMs: number;
  /** Hands one change on (in log order). */
  readonly release: (change: LoggedChange) => void;
}

export interface Hold {
  add(change: LoggedChange): void;
  /** Hands on every waiting change whose version is held, in order. */
  flush(): void;
  /** Drops what waits (the log moved out of reach). */
  clear(): void;
  close(): void;
}

export function createHold({ published, holdTimeoutMs, release }: HoldDeps): Hold {
  const pending: { change: LoggedChange; since: number }[] = [];
  let closed = false;
  let timer: NodeJS.Timeout | undefined;

  const held = (c: LoggedChange): boolean => {
    const v = published.get(c.entry.filename);
    if (v === undefined) return !published.serves(c.entry.filename);
    return v.entry.sha256 === c.entry.sha256 || supersedes(v.entry, v.seq, { entry: c.entry, seq: c.seq });
  };

  const flush = () => {
    const now = Date.now();
    while (pending.length > 0) {
      const head = pending[0]!;
      if (!held(head.change) && now - head.since < holdTimeoutMs) break;
      pending.shift();
      release(head.change);
    }
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (pending.length > 0 && !closed) {
      timer = setTimeout(flush, Math.max(1, holdTimeoutMs - (now - pending[0]!.since)));
      timer.unref();
    }
  };
  // After the install's other listeners (a patch prebuilt for a client one version behind starts
  // before its change is written to the streams), still before any I/O.
  let queued = false;
  const unwatch = published.onInstall(() => {
    if (pending.length === 0 || queued) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      flush();
    });
  });

  return {
    add: (change) => pending.push({ change, since: Date.now() }),
    flush,
    clear: () => (pending.length = 0),
    close() {
      closed = true;
      unwatch();
      if (timer) clearTimeout(timer);
    },
  };
}
