/**
 * A small pool of worker threads for CPU work that must not run on a process's event loop (a
 * reader's patch builds and canonical hashes, a worker's validation of drops). Bounded: at most
 * `threads` threads, each doing one task at a time, and at most `maxQueued` tasks waiting; past
 * that `run` refuses at once (PoolBusy), so a burst of work is dropped rather than piled up. A task that runs longer than
 * `taskTimeoutMs`, or a thread that dies (out of memory included), fails that task and the thread
 * is replaced. Threads start on demand and end after `idleMs` without work, so an idle reader
 * keeps no thread and none of a thread's memory; or, with `idleMs: Infinity` and `prestart`, all
 * start at once and stay (a worker's validation threads: no drop waits for a thread to start).
 */
import { Worker } from 'node:worker_threads';

export class PoolBusy extends Error {
  constructor() {
    super('the worker pool is busy');
  }
}

export interface PoolOptions {
  readonly script: URL;
  /** Given to every thread as its `workerData`. */
  readonly workerData?: unknown;
  readonly threads: number;
  readonly maxQueued: number;
  readonly taskTimeoutMs: number;
  /** An idle thread ends after this long; Infinity: never. */
  readonly idleMs?: number;
  /** Start every thread now rather than on demand. */
  readonly prestart?: boolean;
  /** Heap of each thread, MB (a task that needs more fails, its thread is replaced). */
  readonly maxHeapMb?: number;
}

export interface Pool {
  /**
   * Run one task: `make` is called when a thread takes it (so a refused or waiting task costs no
   * copy of its input), and its message posted with its transfer list; resolves with the reply.
   */
  run<T>(make: () => Message): Promise<T>;
  /** Tasks running or waiting. */
  readonly pending: number;
  /** `run` would refuse a task now (every thread busy and the queue full). */
  readonly full: boolean;
  close(): Promise<void>;
}

export interface Message {
  readonly message: unknown;
  readonly transfer?: readonly ArrayBuffer[];
}

interface Task {
  readonly make: () => Message;
  resolve(value: unknown): void;
  reject(err: Error): void;
}

interface Thread {
  readonly worker: Worker;
  task: Task | undefined;
  timer: NodeJS.Timeout | undefined;
  /** Fail its task and end it (a new thread takes the queue). */
  fail(err: Error): void;
}

export function createPool(opts: PoolOptions): Pool {
  const idleMs = opts.idleMs ?? 5_000;
  const threads = new Set<Thread>();
  const queue: Task[] = [];
  let closed = false;

  const spawn = (): Thread => {
    const worker = new Worker(opts.script, { workerData: opts.workerData, resourceLimits: { maxOldGenerationSizeMb: opts.maxHeapMb ?? 512 } });
    worker.unref();
    const fail = (err: Error) => {
      threads.delete(t);
      if (t.timer) clearTimeout(t.timer);
      const task = t.task;
      t.task = undefined;
      task?.reject(err);
      void worker.terminate();
      next();
    };
    const t: Thread = { worker, task: undefined, timer: undefined, fail };
    worker.on('message', (reply: { ok: true; value: unknown } | { ok: false; error: string }) => {
      const task = t.task;
      t.task = undefined;
      if (t.timer) clearTimeout(t.timer);
      if (reply.ok) task?.resolve(reply.value);
      else task?.reject(new Error(reply.error));
      give(t);
    });
    worker.on('error', fail);
    worker.on('exit', (code) => {
      if (threads.has(t)) fail(new Error(`worker thread exited (${code})`));
    });
    threads.add(t);
    return t;
  };

  /** Hand the next task to `t`, or let it end after idleMs. */
  const give = (t: Thread) => {
    const task = queue.shift();
    if (task === undefined) {
      if (idleMs === Infinity) return;
      t.timer = setTimeout(() => {
        threads.delete(t);
        void t.worker.terminate();
      }, idleMs);
      t.timer.unref();
      return;
    }
    t.task = task;
    t.timer = setTimeout(() => t.fail(new Error(`a worker task ran longer than ${opts.taskTimeoutMs} ms`)), opts.taskTimeoutMs);
    t.timer.unref();
    try {
      const { message, transfer } = task.make();
      t.worker.postMessage(message, (transfer ?? []) as ArrayBuffer[]);
    } catch (err) {
      t.fail(err as Error);
    }
  };

  const isFull = (): boolean => {
    if (queue.length < opts.maxQueued) return false;
    let busy = 0;
    for (const t of threads) if (t.task !== undefined) busy++;
    return busy >= opts.threads;
  };

  const next = () => {
    if (closed || queue.length === 0) return;
    for (const t of threads) {
      if (t.task === undefined) {
        if (t.timer) clearTimeout(t.timer);
        give(t);
        if (queue.length === 0) return;
      }
    }
    while (queue.length > 0 && threads.size < opts.threads) give(spawn());
  };

  if (opts.prestart) while (threads.size < opts.threads) give(spawn());

  return {
    run<T>(make: () => Message): Promise<T> {
      if (closed) return Promise.reject(new Error('the worker pool is closed'));
      if (isFull()) return Promise.reject(new PoolBusy());
      return new Promise<T>((resolve, reject) => {
        queue.push({ make, resolve: resolve as (v: unknown) => void, reject });
        next();
      });
    },
    get full() {
      return isFull();
    },
    get pending() {
      return queue.length + [...threads].filter((t) => t.task !== undefined).length;
    },
    async close() {
      closed = true;
      for (const task of queue.splice(0)) task.reject(new Error('the worker pool is closed'));
      const all = [...threads];
      threads.clear();
      for (const t of all) {
        if (t.timer) clearTimeout(t.timer);
        t.task?.reject(new Error('the worker pool is closed'));
      }
      await Promise.all(all.map((t) => t.worker.terminate()));
    },
  };
}
