/**
 * ISO 8601 times as the API reads them: a calendar date that exists, a time of day, seconds and
 * fractions optional, and a zone (`Z` or an offset). `generated_at` must be in UTC.
 */
const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:Z|([+-])(\d{2}):?(\d{2}))$/;

/** Milliseconds since the epoch, or undefined when the text is not such a time (2026-02-30 is not). */
export function parseIsoTime(text: string): number | undefined {
  const m = ISO_TIME.exec(text);
  if (!m) return undefined;
  const [y, mo, d, h, mi, s, oh, om] = [m[1], m[2], m[3], m[4], m[5], m[6] ?? '0', m[9] ?? '0', m[10] ?? '0'].map(Number) as number[];
  if (h! > 23 || mi! > 59 || s! > 59 || oh! > 23 || om! > 59) return undefined;
  const frac = m[7] ? Number(`0.${m[7]}`) * 1000 : 0;
  const local = Date.UTC(y!, mo! - 1, d!, h!, mi!, s!);
  const back = new Date(local);
  // Date.UTC rolls 2026-02-30 over into March: a real date survives the round trip.
  if (back.getUTCFullYear() !== y || back.getUTCMonth() !== mo! - 1 || back.getUTCDate() !== d) return undefined;
  const offsetMs = (m[8] === '-' ? -1 : 1) * (oh! * 60 + om!) * 60_000;
  return local + Math.floor(frac) - offsetMs;
}

/** `generated_at`: an ISO 8601 time in UTC (`Z` or a zero offset), to the second or finer. */
export function parseGeneratedAt(text: string): number | undefined {
  const zone = /(?:Z|[+-]00:?00)$/.test(text);
  return zone ? parseIsoTime(text) : undefined;
}

/**
 * An instant the service keeps only as milliseconds (a history version's `generated_at`) written as
 * the API writes `generated_at`: to the second (`2026-11-25T15:12:02Z`, as publishers write it),
 * the milliseconds only when there are some (`2026-11-25T15:12:02.118Z`, as a stamp writes it).
 */
export function formatGeneratedAt(ms: number): string {
  return new Date(ms).toISOString().replace(/\.000Z$/, 'Z');
}
