/** `generated_at`: an ISO 8601 time in UTC (`Z` or a zero offset), to the second or finer. */
const ISO_UTC = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]00:?00)$/;

/** Milliseconds since the epoch, or undefined when the text is not an ISO 8601 UTC time. */
export function parseGeneratedAt(text: string): number | undefined {
  const m = ISO_UTC.exec(text);
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = [m[1], m[2], m[3], m[4], m[5], m[6] ?? '0'].map(Number) as number[];
  const frac = m[7] ? Number(`0.${m[7]}`) * 1000 : 0;
  const ms = Date.UTC(y!, mo! - 1, d!, h!, mi!, s!) + Math.floor(frac);
  const back = new Date(ms);
  // Date.UTC rolls 2026-02-30 over into March: a real date survives the round trip.
  if (back.getUTCFullYear() !== y || back.getUTCMonth() !== mo! - 1 || back.getUTCDate() !== d) return undefined;
  if (h! > 23 || mi! > 59 || s! > 59) return undefined;
  return ms;
}
