/**
 * A step run in the background, one run at a time: after a delay, again while there is more to
 * do, and after a failure with a backoff that doubles from 500 ms up to 10 s.
 */
export interface BackgroundStep {
  /** Run after `delay` ms, unless a run is under way (that one reschedules) or already scheduled as soon. */
  schedule(delay: number): void;
  /** Cancel the scheduled run, wait for the one under way, then run once more. */
  runNow(): Promise<void>;
  /** Runs that failed in a row (0 after a success). */
  failures(): number;
  /** Schedule nothing more (a run under way finishes). */
  close(): void;
}

export interface BackgroundStepOptions {
  readonly step: () => Promise<void>;
  /** Asked after each run: whether to run again (after `delay()`, or the backoff after a failure). */
  readonly more: () => boolean;
  readonly delay: () => number;
  /** A run failed (the `attempt`-th in a row); it is retried. */
  readonly onFailure: (err: unknown, attempt: number) => void;
}

const MAX_RETRY_MS = 10_000;

export function createBackgroundStep(opts: BackgroundStepOptions): BackgroundStep {
  let timer: NodeJS.Timeout | undefined;
  /** When the scheduled run is due (performance.now()). */
  let timerAt = 0;
  let running: Promise<void> | undefined;
  let failures = 0;
  let closed = false;

  const schedule = (delay: number) => {
    if (closed || running) return;
    const at = performance.now() + delay;
    if (timer) {
      if (timerAt <= at) return;
      clearTimeout(timer);
    }
    timerAt = at;
    timer = setTimeout(() => {
      timer = undefined;
      void run();
    }, delay);
    timer.unref();
  };

  const run = (): Promise<void> =>
    (running ??= (async () => {
      try {
        await opts.step();
        failures = 0;
      } catch (err) {
        failures++;
        opts.onFailure(err, failures);
      } finally {
        running = undefined;
      }
      if (opts.more()) schedule(failures ? Math.min(250 * 2 ** failures, MAX_RETRY_MS) : opts.delay());
    })());

  return {
    schedule,
    async runNow() {
      if (timer) clearTimeout(timer);
      timer = undefined;
      await running;
      await run();
    },
    failures: () => failures,
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}
