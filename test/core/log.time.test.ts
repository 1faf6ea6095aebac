/**
 * The `time` of every log line (src/log.ts): ISO 8601 in UTC, the millisecond the line was written
 * (the string is reused within a millisecond, never across one), in child loggers too.
 */
import { describe, expect, it } from 'vitest';
import { capturingLogger } from '../helpers/log.js';

describe('log line time', () => {
  it('is the ISO 8601 time of the millisecond each line was written', async () => {
    const { log, lines } = capturingLogger();
    const child = log.child({ component: 'reader' });
    const brackets: { before: number; after: number }[] = [];
    for (let i = 0; i < 40; i++) {
      const before = Date.now();
      (i % 2 ? child : log).info({ i }, 'line');
      brackets.push({ before, after: Date.now() });
      // Many lines within one millisecond, then a jump of several.
      if (i % 10 === 9) await new Promise((r) => setTimeout(r, 5));
    }
    expect(lines).toHaveLength(40);
    const times = lines.map((l) => l.time as string);
    times.forEach((t, i) => {
      expect(t).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const ms = Date.parse(t);
      expect(ms).toBeGreaterThanOrEqual(brackets[i]!.before);
      expect(ms).toBeLessThanOrEqual(brackets[i]!.after);
    });
    expect(new Set(times).size).toBeGreaterThanOrEqual(4);
  });
});
