/**
 * What the stall bench measures while a pattern runs: the reader's event-loop delay and GC pauses
 * (loop-probe.mjs, loaded into the reader, writes them to a file on SIGUSR2 and starts over), a
 * steady client asking /v1/files and /healthz in turn, 10 ms apart, and the reader's RSS peak
 * (sampled every 100 ms). A phase runs one pattern between two reads of the probe and makes one
 * row of the report's table, and one span of the reader's CPU profile.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Span } from '../common/profile.js';
import { memOf } from '../common/proc.js';
import { log } from '../common/run.js';
import type { Get } from './client.js';
import { quantile } from '../common/stats.js';

export const MB = 2 ** 20;

/** What the probe wrote: the loop delay since its last read (ms), the time of the read on the profile clock (µs), memory and GC pauses. */
export interface Probe {
  readonly p99: number;
  readonly max: number;
  readonly atUs: number;
  readonly mem?: Record<string, number>;
  readonly gc?: { count: number; totalMs: number; maxMs: number; major: number };
}

/** The reader's memory as process.memoryUsage() tells it, MB. */
export const memLine = (m: Record<string, number> | undefined): string =>
  m === undefined ? '' : ['rss', 'heapTotal', 'heapUsed', 'external', 'arrayBuffers'].map((k) => `${k} ${((m[k] ?? 0) / MB).toFixed(0)}`).join(', ');

export interface MeterOptions {
  /** The reader's process, started with loop-probe.mjs writing to `probeDir`. */
  readonly pid: number;
  readonly probeDir: string;
  /** The reader's base URL and the steady client's key. */
  readonly url: string;
  readonly key: string;
  readonly get: Get;
  /** Bytes published so far (the table's "published"). */
  readonly publishedBytes: () => number;
}

export interface Meter {
  /** Read the reader's probe (which starts it over). */
  probe(): Promise<Probe>;
  /** Run one pattern (`run` returns its outcome) and measure it: its row of the table, its span. */
  phase(label: string, run: () => Promise<string>): Promise<{ loopP99: number; steadyP99: number }>;
  /** One row per phase: pattern, loop delay, GC, steady p99, RSS peak, published, outcome. */
  readonly rows: string[][];
  /** Each phase's span on the reader's profile clock. */
  readonly spans: Span[];
  /** Stop the steady client and the RSS sampler. */
  stop(): Promise<void>;
}

/** Start the steady client and the RSS sampler at once; they run until stop(). */
export function startMeter(o: MeterOptions): Meter {
  const probe = async (): Promise<Probe> => {
    const path = join(o.probeDir, `loop-${o.pid}.json`);
    const before = await readFile(path, 'utf8').catch(() => '{"n":-1}');
    process.kill(o.pid, 'SIGUSR2');
    for (;;) {
      await sleep(20);
      const now = await readFile(path, 'utf8').catch(() => before);
      if (now !== before && now.length > 0) return JSON.parse(now) as Probe;
    }
  };

  let steady: number[] = [];
  let steadyErrors = 0;
  let stopSteady = false;
  const steadyClient = (async () => {
    while (!stopSteady) {
      for (const path of ['/v1/files', '/healthz']) {
        const t = performance.now();
        try {
          const res = await o.get(`${o.url}${path}`, { 'x-api-key': o.key });
          if (res.status !== 200) steadyErrors++;
        } catch {
          steadyErrors++;
        }
        steady.push(performance.now() - t);
      }
      await sleep(10);
    }
  })();
  let rssPeak = 0;
  const rssTimer = setInterval(() => (rssPeak = Math.max(rssPeak, memOf(o.pid).rss)), 100);

  const rows: string[][] = [];
  const spans: Span[] = [];
  const phase = async (label: string, run: () => Promise<string>) => {
    const first = await probe(); // reset
    const fromUs = first.atUs;
    log(`${label}: reader memory before (MB): ${memLine(first.mem)}`);
    steady = [];
    steadyErrors = 0;
    rssPeak = memOf(o.pid).rss;
    const own = monitorEventLoopDelay({ resolution: 1 });
    own.enable();
    const note = await run();
    own.disable();
    log(`${label}: this process's loop delay p99 ${(own.percentile(99) / 1e6).toFixed(1)} ms`);
    const l = await probe();
    spans.push({ label, fromUs, toUs: l.atUs });
    const p99 = quantile(steady, 0.99);
    rows.push([
      label,
      `${l.p99.toFixed(1)} ms (max ${l.max.toFixed(0)})`,
      l.gc ? `${l.gc.count} (${l.gc.major} major): ${l.gc.totalMs.toFixed(0)} ms, longest ${l.gc.maxMs.toFixed(1)}` : '',
      `${p99.toFixed(1)} ms`,
      `${(rssPeak / MB).toFixed(0)} MB`,
      `${(o.publishedBytes() / MB).toFixed(1)} MB`,
      note,
    ]);
    log(`${label}: reader memory after (MB): ${memLine(l.mem)}`);
    log(
      `${label}: loop p99 ${l.p99.toFixed(1)} ms, steady p99 ${p99.toFixed(1)} ms (${steadyErrors} errors), RSS peak ${(rssPeak / MB).toFixed(0)} MB; ${note}`,
    );
    return { loopP99: l.p99, steadyP99: p99 };
  };

  return {
    probe,
    phase,
    rows,
    spans,
    async stop() {
      stopSteady = true;
      await steadyClient;
      clearInterval(rssTimer);
    },
  };
}
