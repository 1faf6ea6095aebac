/** Durations as operators write them in the config: `250ms`, `30s`, `1m`, `1h`, `1d`. */
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
export const DURATION_PATTERN = '^[0-9]+(\\.[0-9]+)?(ms|s|m|h|d)$';
const DURATION_RE = new RegExp(DURATION_PATTERN);

/** Milliseconds in a duration string, or undefined when it is not one. */
export function parseDuration(text: string): number | undefined {
  const m = DURATION_RE.exec(text.trim());
  if (!m) return undefined;
  const unit = m[2] as string;
  return Math.round(Number.parseFloat(text) * (UNITS[unit] as number));
}

/** A short human form of a duration in milliseconds: `850ms`, `12s`, `4m10s`, `3h05m`, `2d4h`. */
export function formatAge(ms: number): string {
  if (!Number.isFinite(ms)) return '-';
  const neg = ms < 0 ? '-' : '';
  let v = Math.abs(ms);
  if (v < 1000) return `${neg}${Math.round(v)}ms`;
  v = Math.floor(v / 1000);
  if (v < 60) return `${neg}${v}s`;
  const s = v % 60;
  v = Math.floor(v / 60);
  if (v < 60) return `${neg}${v}m${String(s).padStart(2, '0')}s`;
  const m = v % 60;
  v = Math.floor(v / 60);
  if (v < 24) return `${neg}${v}h${String(m).padStart(2, '0')}m`;
  return `${neg}${Math.floor(v / 24)}d${v % 24}h`;
}
