/** oddsfiles_dependency_up{dependency}: each bound check is run at scrape time, 1 when it resolves within the timeout. */
import { Gauge, type Registry } from 'prom-client';
import { withTimeout } from '../timeout.js';
import { safeLabel } from './metric-label.js';

export interface DependencyMetrics {
  /** Check `dependency` at every scrape (replaces an earlier check of the same name). */
  bind(dependency: string, check: () => Promise<unknown>): void;
  /** bind, unless a check of that name is bound already. */
  bindIfAbsent(dependency: string, check: () => Promise<unknown>): void;
}

/** `timeoutMs`: longest a scrape waits for a check before reporting its dependency down. */
export function createDependencyMetrics(registry: Registry, timeoutMs: number): DependencyMetrics {
  const probes = new Map<string, () => Promise<unknown>>();
  new Gauge({
    name: 'oddsfiles_dependency_up',
    help: 'Whether a dependency (redis, store) answered at scrape time: 1 up, 0 down.',
    labelNames: ['dependency'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      await Promise.all(
        [...probes.entries()].map(async ([dependency, check]) => {
          const ok = await withTimeout(Promise.resolve().then(check), timeoutMs, dependency).then(
            () => 1,
            () => 0,
          );
          this.set({ dependency }, ok);
        }),
      );
    },
  });
  return {
    bind(dependency, check) {
      probes.set(safeLabel(dependency), check);
    },
    bindIfAbsent(dependency, check) {
      const label = safeLabel(dependency);
      if (!probes.has(label)) probes.set(label, check);
    },
  };
}
