/**
 * The event-loop delay gauges (`oddsfiles_nodejs_eventloop_lag_*`), in place of prom-client's.
 * Both sample with perf_hooks' monitorEventLoopDelay, whose timer wakes the loop at every sample;
 * prom-client's reports each gap between samples whole, so its figures include the sampling
 * interval (an idle process shows its 10 ms), which ties the interval to the meaning of the
 * metric. These report only the delay beyond the interval, so a process can sample less often
 * (an idle worker then wakes ten times a second instead of a hundred) and still read 0 when idle.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Gauge, type Registry } from 'prom-client';

/** The statistics, one gauge each: `<prefix>nodejs_eventloop_lag_<stat>_seconds`, as prom-client names them. */
const STATS = ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99'] as const;
type Stat = (typeof STATS)[number];

const LAG = 'nodejs_eventloop_lag_seconds';

/**
 * Registers the gauges on `registry` under `prefix`, sampling every `sampleMs`, in place of any
 * event-loop gauges prom-client's default metrics put there. `…_lag_seconds` is how long a task
 * queued at a scrape waited for the loop (set when it runs: the next scrape shows it), the others
 * the delays since the last scrape.
 */
export function registerLoopDelayMetrics(registry: Registry, prefix: string, sampleMs: number): void {
  for (const m of registry.getMetricsAsArray()) if (m.name.startsWith(`${prefix}nodejs_eventloop_lag`)) registry.removeSingleMetric(m.name);
  const histogram = monitorEventLoopDelay({ resolution: sampleMs });
  histogram.enable();
  const intervalNs = sampleMs * 1e6;
  const beyond = (ns: number) => Math.max(0, ns - intervalNs) / 1e9;
  const read: Record<Stat, () => number> = {
    min: () => beyond(histogram.min),
    max: () => beyond(histogram.max),
    mean: () => beyond(histogram.mean),
    stddev: () => histogram.stddev / 1e9,
    p50: () => beyond(histogram.percentile(50)),
    p90: () => beyond(histogram.percentile(90)),
    p99: () => beyond(histogram.percentile(99)),
  };
  // Registered first: a scrape runs collect() in the order of registration, and this one sets the others.
  const lag = new Gauge({
    name: `${prefix}${LAG}`,
    help: 'How long a task queued at the last scrape waited for the event loop, seconds.',
    registers: [registry],
    collect() {
      const start = process.hrtime.bigint();
      setImmediate(() => lag.set(Number(process.hrtime.bigint() - start) / 1e9));
      // No sample since the last scrape (scrapes closer together than samples): nothing to report.
      const empty = histogram.count === 0;
      for (const [stat, gauge] of gauges) gauge.set(empty ? 0 : read[stat]());
      histogram.reset();
    },
  });
  const gauges = STATS.map(
    (stat) =>
      [
        stat,
        new Gauge({
          name: `${prefix}nodejs_eventloop_lag_${stat}_seconds`,
          help:
            stat === 'stddev'
              ? 'The standard deviation of the event-loop delays since the last scrape, seconds.'
              : `The ${stat} event-loop delay since the last scrape, beyond the sampling interval, seconds.`,
          registers: [registry],
        }),
      ] as const,
  );
}
