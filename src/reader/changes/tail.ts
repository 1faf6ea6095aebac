/**
 * The tail of the change log: reads it as it grows (XREAD BLOCK, on a connection of its own) and
 * hands each new change on once, in order. Redis away: it waits (backing off) and reads on from
 * its position when Redis is back, so no change is skipped. The log moved out of reach (trimmed
 * past its position, restarted below it by a Redis that lost its data, or holding another change
 * at its position after losing its last writes): it says so (`reset`) and goes on from the log's
 * new position.
 */
import type { ChangeLog, LoggedChange } from '../../catalog/change-log.js';
import type { Logger } from '../../log.js';

const FIRST_RETRY_MS = 250;
const MAX_RETRY_MS = 5000;
const READ_COUNT = 1000;

export interface TailDeps {
  /** Reads with XREAD BLOCK: a connection of its own. */
  readonly tail: ChangeLog;
  /** Bounds reads: the command connection. */
  readonly log: ChangeLog;
  readonly logger: Logger;
  readonly blockMs: number;
  /** The log's last position when the tail starts. */
  readonly start: (last: number) => void;
  /** Every position up to `to` is out of reach; the tail goes on after `to`. */
  readonly reset: (to: number) => void;
  /** One new change, in order. */
  readonly take: (change: LoggedChange) => void;
  /** After each read (with or without changes). */
  readonly read: () => void;
}

export interface Tail {
  /** Resolves once the starting position is known (or the tail is closed). */
  readonly ready: Promise<void>;
  readonly started: boolean;
  close(): void;
}

export function startTail(deps: TailDeps): Tail {
  const { tail, log, logger, blockMs } = deps;
  let readPosition = 0;
  let closed = false;
  let started = false;
  let resolveReady!: () => void;
  const ready = new Promise<void>((r) => (resolveReady = r));
  /** Ends the wait between two attempts (close). */
  let wake: (() => void) | undefined;
  /** A read failed: before the next, check the log still reaches our position (a failover may have lost its end). */
  let verify = false;
  /** The last change handed on: after a failure, the log must still have it at its position. */
  let lastTaken: LoggedChange | undefined;

  const reset = (to: number) => {
    logger.warn({ from: readPosition, to }, 'the change log moved out of reach; streams start again');
    readPosition = to;
    deps.reset(to);
  };

  const accept = (changes: readonly LoggedChange[]) => {
    for (const c of changes) {
      if (c.seq <= readPosition) continue;
      // Positions are consecutive: a hole means the log was trimmed past us.
      if (c.seq !== readPosition + 1 && readPosition !== 0) reset(c.seq - 1);
      readPosition = c.seq;
      lastTaken = c;
      deps.take(c);
    }
    deps.read();
  };

  /**
   * The log holds another change at our position than the one we handed on: a Redis that lost its
   * last writes (a crash between fsyncs, a failover to a replica behind) gave their positions to
   * new changes, and the head alone does not tell once it has passed ours again.
   */
  const rewritten = async (): Promise<boolean> => {
    const held = lastTaken;
    if (held === undefined || held.seq !== readPosition) return false;
    const [now] = await log.range(readPosition - 1, 1);
    return now !== undefined && now.seq === readPosition && (now.entry.sha256 !== held.entry.sha256 || now.entry.filename !== held.entry.filename);
  };

  const readOnce = async () => {
    if (!started) {
      const b = await log.bounds();
      readPosition = b.last;
      deps.start(b.last);
      started = true;
      resolveReady();
    }
    if (verify) {
      const b = await log.bounds();
      if (b.last < readPosition || (await rewritten())) reset(b.last);
      verify = false;
    }
    const changes = await tail.read(readPosition, READ_COUNT, blockMs);
    if (closed) return;
    if (changes.length === 0) {
      // Quiet, or the log restarted below us (Redis lost its data), or a new epoch emptied it
      // and moved its position past ours (restored from the store): the head tells.
      const b = await log.bounds();
      if (b.last < readPosition || (b.first === undefined && b.last > readPosition)) reset(b.last);
    }
    accept(changes);
  };

  const loop = async () => {
    let delay = FIRST_RETRY_MS;
    while (!closed) {
      try {
        await readOnce();
        delay = FIRST_RETRY_MS;
      } catch (err) {
        if (closed) break;
        verify = true;
        logger.debug({ err: { message: (err as Error).message } }, 'reading the change log failed; retrying');
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, delay).unref();
        });
        delay = Math.min(delay * 2, MAX_RETRY_MS);
      }
    }
  };
  // Not waited for on close: a read on a Redis that does not answer ends when its connection is
  // closed (the owner's job), and what it returns after that is dropped.
  void loop();

  return {
    ready,
    get started() {
      return started;
    },
    close() {
      closed = true;
      wake?.();
      resolveReady();
    },
  };
}
