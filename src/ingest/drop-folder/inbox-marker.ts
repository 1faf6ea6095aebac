/**
 * Which inbox the running workers watch. A worker role keeps INBOX_DIR/.oddsfiles-inbox (a random
 * id, written once with flag wx: workers sharing the folder over a network filesystem share it)
 * and registers that id in Redis for as long as it runs. `publish` and `rejected retry` read the
 * marker in their own INBOX_DIR and look its id up before they move a file into .processing
 * (cli/inbox-check.ts): a claim made in a folder no worker watches ends `gone`. The watcher never
 * queues the marker: it ignores every dotfile (inbox.ts, isIgnoredName).
 *
 * A registration is one member of the sorted set keys.inbox(id) per process, scored by when it
 * lapses on Redis's own clock (workers and commands on other machines need not agree on the
 * time); one process stopping never unregisters the others, and the key expires with the last.
 * Each process also names its host and absolute inbox path in keys.inboxes, so that a refused
 * command can say where the workers watch.
 */
import { randomBytes } from 'node:crypto';
import { lstat, readFile, rename, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Logger } from '../../log.js';
import type { RedisKeys } from '../../redis/key-names.js';
import { ifExists } from '../../missing.js';

export const INBOX_MARKER = '.oddsfiles-inbox';
/** How long a registration lives without a refresh, and how often it is refreshed. */
export const INBOX_TTL_MS = 60_000;
export const INBOX_REFRESH_MS = 20_000;

const ID = /^[0-9a-f]{32}$/;

export function inboxMarkerPath(inboxDir: string): string {
  return join(inboxDir, INBOX_MARKER);
}

/** The id in INBOX_DIR's marker; undefined when there is none (or it holds no id). */
export async function readInboxMarker(inboxDir: string): Promise<string | undefined> {
  const path = inboxMarkerPath(inboxDir);
  // lstat first: a FIFO or a folder under that name is never read (a FIFO would block).
  const st = await ifExists(lstat(path));
  if (!st?.isFile() || st.size > 1024) return undefined;
  const id = ((await ifExists(readFile(path, 'utf8'))) ?? '').trim();
  return ID.test(id) ? id : undefined;
}

/**
 * The marker's id, the marker created when there is none (flag wx: of workers starting together,
 * the first one's id wins). A marker that holds no id for a second (its writer died between the
 * create and the write, or someone edited it) is replaced.
 */
export async function ensureInboxMarker(inboxDir: string): Promise<string> {
  const path = inboxMarkerPath(inboxDir);
  for (let attempt = 0; ; attempt++) {
    const found = await readInboxMarker(inboxDir);
    if (found) return found;
    const id = randomBytes(16).toString('hex');
    try {
      await writeFile(path, `${id}\n`, { flag: 'wx' });
      return id;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (attempt >= 20) {
      const tmp = `${path}.${randomBytes(4).toString('hex')}.tmp`;
      await writeFile(tmp, `${id}\n`);
      await rename(tmp, path);
      return (await readInboxMarker(inboxDir)) ?? id;
    }
    await sleep(50);
  }
}

/** Redis's clock, in milliseconds. */
async function redisNow(redis: Redis): Promise<number> {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** Does a running worker (one whose registration has not lapsed) watch the inbox with this id? */
export async function inboxWatched(redis: Redis, keys: RedisKeys, id: string): Promise<boolean> {
  const now = await redisNow(redis);
  return (await redis.zcount(keys.inbox(id), `(${now}`, '+inf')) > 0;
}

export interface WatchedInbox {
  readonly host: string;
  /** Absolute, on that host. */
  readonly inbox: string;
}

/** Where the running workers (registrations not lapsed) watch, each host and folder once. */
export async function watchedInboxes(redis: Redis, keys: RedisKeys): Promise<WatchedInbox[]> {
  const now = await redisNow(redis);
  const seen = new Map<string, WatchedInbox>();
  for (const m of await redis.zrangebyscore(keys.inboxes, `(${now}`, '+inf')) {
    try {
      const { host, inbox } = JSON.parse(m) as WatchedInbox;
      if (typeof host === 'string' && typeof inbox === 'string') seen.set(`${host}\0${inbox}`, { host, inbox });
    } catch {
      // not one of ours
    }
  }
  return [...seen.values()];
}

export interface InboxRegistrationDeps {
  readonly inboxDir: string;
  /** A command connection. */
  readonly redis: Redis;
  readonly keys: RedisKeys;
  readonly log: Logger;
  readonly ttlMs?: number;
  readonly refreshMs?: number;
}

export interface InboxRegistration {
  /** This process's member in the registration set. */
  readonly member: string;
  /** The id registered last; undefined while the marker could not be read or created. */
  readonly id: string | undefined;
  /** Read the marker again (created again if it was removed) and register its id for another TTL. */
  refresh(): Promise<void>;
  /** Stop refreshing and withdraw this process's registration. */
  close(): Promise<void>;
}

/**
 * Registers the inbox at once, then every refreshMs (the timer never keeps the process alive).
 * Failures (Redis away, the inbox not writable) are logged and tried again at the next refresh:
 * the worker's own job never waits on them.
 */
export async function startInboxRegistration(deps: InboxRegistrationDeps): Promise<InboxRegistration> {
  const ttlMs = deps.ttlMs ?? INBOX_TTL_MS;
  const member = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const where = JSON.stringify({ worker: member, host: hostname(), inbox: resolve(deps.inboxDir) });
  let id: string | undefined;
  let failing = false;
  let closed = false;
  let running: Promise<void> | undefined;

  const register = async () => {
    const current = await ensureInboxMarker(deps.inboxDir);
    const now = await redisNow(deps.redis);
    const key = deps.keys.inbox(current);
    const tx = deps.redis
      .multi()
      .zadd(key, now + ttlMs, member)
      .zremrangebyscore(key, '-inf', now)
      .pexpire(key, ttlMs)
      .zadd(deps.keys.inboxes, now + ttlMs, where)
      .zremrangebyscore(deps.keys.inboxes, '-inf', now)
      .pexpire(deps.keys.inboxes, ttlMs);
    // The marker was replaced meanwhile: withdraw from the old id's set.
    if (id !== undefined && id !== current) tx.zrem(deps.keys.inbox(id), member);
    const replies = (await tx.exec()) ?? [];
    for (const [err] of replies) if (err) throw err;
    if (id !== current || failing) deps.log.info({ inbox: deps.inboxDir, inboxId: current }, 'registered the inbox this worker watches');
    id = current;
    failing = false;
  };

  const attempt = async () => {
    try {
      await register();
    } catch (err) {
      // At warn once per failing spell (a Redis outage is reported by the connection itself).
      const fields = { inbox: deps.inboxDir, err: { message: (err as Error).message } };
      if (failing) deps.log.debug(fields, 'could not register the inbox this worker watches');
      else deps.log.warn(fields, 'could not register the inbox this worker watches; publish and rejected retry may refuse to run meanwhile; retrying');
      failing = true;
    } finally {
      running = undefined;
    }
  };
  const refresh = (): Promise<void> => (closed ? Promise.resolve() : (running ??= attempt()));

  await refresh();
  const timer = setInterval(() => void refresh(), deps.refreshMs ?? INBOX_REFRESH_MS);
  timer.unref();

  return {
    member,
    get id() {
      return id;
    },
    refresh,
    async close() {
      closed = true;
      clearInterval(timer);
      await running;
      const tx = deps.redis.multi().zrem(deps.keys.inboxes, where);
      if (id !== undefined) tx.zrem(deps.keys.inbox(id), member);
      await tx.exec().catch(() => undefined);
    },
  };
}
