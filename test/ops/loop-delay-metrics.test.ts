/**
 * The event-loop delay gauges report the delay beyond their sampling interval: an idle process
 * reads near 0 whatever the interval (prom-client's own read the interval itself), and a loop
 * held for a while shows as that long.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/ops/metrics.js';

/** The value of an unlabelled sample in a Prometheus text exposition. */
function value(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no sample ${name}`);
  return Number(line.slice(name.length + 1));
}

const hold = (ms: number) => {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // the loop is held
  }
};

describe('event-loop delay metrics', () => {
  it('read the delay beyond the sampling interval, not the interval itself', async () => {
    const metrics = createMetrics({ loopSampleMs: 200 });
    await metrics.render(); // starts a fresh window
    await sleep(1_300);
    const idle = await metrics.render();
    // Six samples of an idle loop: their gaps are the interval itself, which is not a delay.
    for (const stat of ['p50', 'p90', 'mean']) expect(value(idle, `oddsfiles_nodejs_eventloop_lag_${stat}_seconds`), stat).toBeLessThan(0.1);
    expect(value(idle, 'oddsfiles_nodejs_eventloop_lag_min_seconds')).toBeLessThan(0.1);
    expect(value(idle, 'oddsfiles_nodejs_eventloop_lag_min_seconds')).toBeGreaterThanOrEqual(0);

    await sleep(250);
    hold(600);
    await sleep(250);
    const held = await metrics.render();
    expect(value(held, 'oddsfiles_nodejs_eventloop_lag_max_seconds')).toBeGreaterThanOrEqual(0.35);
  });

  it('are registered once, under the service prefix, beside the other process metrics', async () => {
    const text = await createMetrics({ loopSampleMs: 100 }).render();
    for (const stat of ['', '_min', '_max', '_mean', '_stddev', '_p50', '_p90', '_p99']) {
      const name = `oddsfiles_nodejs_eventloop_lag${stat}_seconds`;
      expect(
        text.split('\n').filter((l) => l.startsWith(`# TYPE ${name} `)),
        name,
      ).toHaveLength(1);
    }
    expect(text).toContain('oddsfiles_process_cpu_seconds_total');
  });
});
