/**
 * Where a worker checks its drops (check-drop.ts): on validation threads, so that reading a large
 * drop's every byte holds no event loop (the one that also serves readers in one process or for a
 * reader's dry runs of uploads, or the one running a worker's other drops); or, with no threads,
 * on the loop itself.
 *
 * The threads read a drop's bytes in place: a claim is read into shared memory
 * (`sharedMinBytes`), and other bytes are copied into it first. A worker's threads start with the
 * checker and stay, so no drop waits for a thread to start and compile the schema; an occasional
 * user (a reader's dry runs of uploads) has them start on demand and end once idle.
 */
import { availableParallelism } from 'node:os';
import type { Bookmaker } from '../../config.js';
import { RejectionError, type RejectionReason } from '../../errors.js';
import type { FeedInfo } from '../../feeds/registry.js';
import { createDocumentValidator, type DocumentCheck, type DocumentLimits } from '../../feeds/validate.js';
import { workerScript } from '../../paths.js';
import { createPool } from '../../threads/pool.js';
import { checkDrop, type CheckedDrop } from './check-drop.js';
import { createCoreContention, type ContentionOptions, type ThreadTiming } from './core-contention.js';

export type { CheckedDrop } from './check-drop.js';

export interface DropChecker {
  /** The drop's outcome: the document to publish and its SHA-256s, or a RejectionError. */
  (check: DocumentCheck): Promise<CheckedDrop>;
  /** Drops of at least this size go to a thread: read them into shared memory (a SharedArrayBuffer), and they reach it without a copy. Infinity: none does. */
  readonly sharedMinBytes: number;
  close(): Promise<void>;
}

/** What a validation thread is sent. */
export interface CheckRequest {
  readonly feed: FeedInfo;
  readonly bookmaker: Bookmaker;
  /** A view of shared memory. */
  readonly bytes: Uint8Array;
  readonly receivedAtMs: number;
  readonly nowMs: number;
}

/** What it answers: the outcome, with the published bytes as a range of the drop's or, stamped, as new bytes. */
export type CheckAnswer = (
  | { readonly rejected: { readonly reason: RejectionReason; readonly detail: string } }
  | {
      readonly generatedAt: string;
      readonly generatedAtMs: number;
      readonly sha256: string;
      readonly sourceSha256: string | undefined;
      readonly stamped?: Uint8Array;
      readonly start?: number;
      readonly end?: number;
    }
) & {
  /** How long the check took and the thread's CPU so far (core-contention.ts). */
  readonly timing: ThreadTiming;
};

/**
 * One thread where a check would otherwise hold a loop that serves readers (`npm start`, a worker
 * with the reader role, a reader's dry runs of uploads), on any number of cores: on one core the
 * kernel shares it between the loop and the thread in slices of a few ms, where a check on the
 * loop holds it for the whole drop (~50 ms for 5 MB). A worker that serves no readers gets one on
 * two cores or more, where the check runs on another core beside its other drops' file and Redis
 * steps; on one core it checks on its loop, for about a tenth less CPU per drop. A second thread
 * gains nothing on two cores.
 */
export function defaultValidateThreads(servesReaders: boolean, cores = availableParallelism()): number {
  return servesReaders || cores >= 2 ? 1 : 0;
}

/** A validation thread's heap: JSON.parse + ajv of the largest drop (when the schema needs them) peak at several times its size. */
function checkHeapMb(maxFileBytes: number): number {
  return Math.max(256, Math.ceil((8 * maxFileBytes) / (1024 * 1024)));
}

export interface DropCheckerOptions {
  readonly limits: DocumentLimits;
  readonly schema: object;
  /** 0: check on the caller's event loop. */
  readonly threads: number;
  /** Threads start when needed and end once idle, instead of starting now and staying. */
  readonly onDemand?: boolean;
  /** A thread's heap, MB; default: room for JSON.parse + ajv of the largest drop. */
  readonly heapMb?: number;
  /** Smaller drops are checked on the caller's loop; default THREAD_MIN_BYTES. */
  readonly threadMinBytes?: number;
  /**
   * Check on the caller's loop for a while when the thread waits for a core (core-contention.ts):
   * for a worker whose loop serves no readers, on the default thread count. With one thread only.
   * Its options, or true.
   */
  readonly yieldWhenBusy?: boolean | ContentionOptions;
  /** Told once each time the checks turn to the loop because the threads wait for a core. */
  readonly onBusy?: () => void;
  /** Told where each check runs. */
  readonly onCheck?: (on: 'thread' | 'loop') => void;
}

/**
 * Drops smaller than this are checked on the caller's loop even with threads: their check takes
 * about what a hop to a thread and back does (~0.1 ms of CPU, more in wall time when the thread
 * must be woken), and holds the loop for no longer.
 */
export const THREAD_MIN_BYTES = 64 * 1024;

export function createDropChecker(opts: DropCheckerOptions): DropChecker {
  const { limits, schema, threads } = opts;
  const validate = createDocumentValidator(limits, schema);
  const inline = async (check: DocumentCheck) => {
    opts.onCheck?.('loop');
    return checkDrop(validate, check);
  };
  if (threads <= 0) return Object.assign(inline, { sharedMinBytes: Infinity, close: () => Promise.resolve() });
  const threadMinBytes = opts.threadMinBytes ?? THREAD_MIN_BYTES;
  const pool = createPool({
    script: workerScript(import.meta.url, './check-thread.js'),
    workerData: { limits, schema },
    threads,
    // The worker's concurrency bounds the tasks; none is refused.
    maxQueued: Infinity,
    taskTimeoutMs: 120_000,
    ...(opts.onDemand ? { idleMs: 5_000 } : { idleMs: Infinity, prestart: true }),
    maxHeapMb: opts.heapMb ?? checkHeapMb(limits.maxFileBytes),
  });
  // One thread is judged: with more, each would need a window of its own.
  const contention = opts.yieldWhenBusy && threads === 1 ? createCoreContention(opts.yieldWhenBusy === true ? {} : opts.yieldWhenBusy) : undefined;
  const check = async (c: DocumentCheck): Promise<CheckedDrop> => {
    if (c.bytes.length < threadMinBytes || (contention && !contention.useThread())) return inline(c);
    opts.onCheck?.('thread');
    const bytes = c.bytes.buffer instanceof SharedArrayBuffer ? c.bytes : inSharedMemory(c.bytes);
    const a = await pool.run<CheckAnswer>(() => ({
      message: { feed: c.feed, bookmaker: c.bookmaker, bytes, receivedAtMs: c.receivedAt.getTime(), nowMs: c.now.getTime() } satisfies CheckRequest,
    }));
    if (contention?.observe(a.timing)) opts.onBusy?.();
    if ('rejected' in a) throw new RejectionError(a.rejected.reason, a.rejected.detail);
    const published = a.stamped ? Buffer.from(a.stamped.buffer, a.stamped.byteOffset, a.stamped.byteLength) : c.bytes.subarray(a.start, a.end);
    return {
      doc: { bytes: published, generatedAt: a.generatedAt, generatedAtMs: a.generatedAtMs, stamped: a.stamped !== undefined },
      sha256: a.sha256,
      sourceSha256: a.sourceSha256,
    };
  };
  return Object.assign(check, { sharedMinBytes: threadMinBytes, close: () => pool.close() });
}

function inSharedMemory(bytes: Buffer): Buffer {
  const shared = Buffer.from(new SharedArrayBuffer(bytes.length));
  bytes.copy(shared);
  return shared;
}
