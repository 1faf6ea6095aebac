/** Statistics and number formats of the reports. */

/** Nearest rank: p99 of 60 samples is the 60th (the maximum). */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1));
  return s[i]!;
}

export const median = (values: readonly number[]): number => quantile(values, 0.5);

/** In place (Fisher–Yates): the order of the systems in an interleaved round. */
export function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

/** Wall-clock milliseconds with sub-millisecond resolution (comparable with Date.now()). */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

export function fmtMs(v: number): string {
  if (!Number.isFinite(v)) return '—';
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

export function fmtInt(v: number): string {
  return Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : '—';
}

export function fmtX(v: number): string {
  return Number.isFinite(v) ? `${v.toFixed(2)}×` : '—';
}
