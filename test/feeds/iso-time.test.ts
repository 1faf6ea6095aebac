/**
 * ISO 8601 times as the API reads them (src/feeds/generated-at.ts): `generated_at` and the history
 * parameters. A date that does not exist is refused, not rolled over; an offset moves the instant.
 */
import { describe, expect, it } from 'vitest';
import { formatGeneratedAt, parseGeneratedAt, parseIsoTime } from '../../src/feeds/generated-at.js';

describe('ISO 8601 times', () => {
  it('read the instant Date.parse reads, offsets included', () => {
    for (const t of [
      '2026-11-28T12:00:00Z',
      '2026-11-28T12:00Z',
      '2026-11-28T12:00:00.5Z',
      '2026-11-28T12:00:00.123456789Z',
      '2026-11-28T13:30:00+01:30',
      '2026-11-28T06:00:00-06:00',
      '2024-02-29T00:00:00Z',
    ])
      expect(parseIsoTime(t), t).toBe(Date.parse(t.replace(/(\.\d{3})\d+/, '$1')));
    expect(parseIsoTime('2026-11-28T13:00:00+0100')).toBe(Date.parse('2026-11-28T12:00:00Z'));
  });

  it('refuse dates and times that do not exist, and what is not such a time', () => {
    for (const t of [
      '2026-11-31T00:00:00Z',
      '2026-02-29T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-00-10T00:00:00Z',
      '2026-01-01T24:00:00Z',
      '2026-01-01T12:60:00Z',
      '2026-01-01T12:00:60Z',
      '2026-01-01T12:00:00+24:00',
      '2026-01-01T12:00:00',
      '2026-01-01',
      'yesterday',
      '2026-01-01T12:00:00 01:00',
    ])
      expect(parseIsoTime(t), t).toBeUndefined();
  });

  it('generated_at is in UTC: Z or a zero offset only', () => {
    expect(parseGeneratedAt('2026-11-28T12:00:00Z')).toBe(Date.parse('2026-11-28T12:00:00Z'));
    expect(parseGeneratedAt('2026-11-28T12:00:00+00:00')).toBe(Date.parse('2026-11-28T12:00:00Z'));
    expect(parseGeneratedAt('2026-11-28T12:00:00-0000')).toBe(Date.parse('2026-11-28T12:00:00Z'));
    expect(parseGeneratedAt('2026-11-28T13:00:00+01:00')).toBeUndefined();
    expect(parseGeneratedAt('2026-02-30T12:00:00Z')).toBeUndefined();
  });

  it('generated_at kept as milliseconds is written back as publishers and the stamp write it: .000 only when there are milliseconds', () => {
    for (const t of ['2026-11-25T15:12:02Z', '2026-11-25T15:12:02.118Z', '2026-11-25T15:12:02.100Z', '1999-12-31T23:59:59.999Z'])
      expect(formatGeneratedAt(parseGeneratedAt(t)!), t).toBe(t);
    expect(formatGeneratedAt(Date.parse('2026-11-25T15:12:02.000Z'))).toBe('2026-11-25T15:12:02Z');
  });
});
