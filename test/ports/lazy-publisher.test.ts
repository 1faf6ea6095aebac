/**
 * The reader's PublishPort is started on its first upload (what it loads, BullMQ and the document
 * validator, costs a reader that never takes one nothing): started once for concurrent first
 * uses, tried again after a failed start, never started by a close, closed when it was started.
 */
import { describe, expect, it } from 'vitest';
import { lazyPublisher, type ClosablePublisher } from '../../src/ports/lazy-publisher.js';

function fakePublisher(log: string[]): ClosablePublisher {
  return {
    submit: async (filename) => {
      log.push(`submit ${filename}`);
      return { outcome: 'pending' };
    },
    check: async (filename) => {
      log.push(`check ${filename}`);
      return { outcome: 'rejected', reason: 'unknown_filename', detail: '' };
    },
    close: async () => {
      log.push('close');
    },
  };
}

const bytes = Buffer.from('{}');

describe('lazyPublisher', () => {
  it('starts nothing until used, then once for concurrent first uses', async () => {
    const log: string[] = [];
    let starts = 0;
    const port = lazyPublisher(async () => {
      starts++;
      await new Promise((r) => setTimeout(r, 10));
      return fakePublisher(log);
    });
    expect(starts).toBe(0);
    const outcomes = await Promise.all([
      port.submit('a.json', bytes, new Date()),
      port.check('b.json', bytes, new Date()),
      port.submit('c.json', bytes, new Date()),
    ]);
    expect(starts).toBe(1);
    expect(outcomes.map((o) => o.outcome)).toEqual(['pending', 'rejected', 'pending']);
    expect(log).toEqual(['submit a.json', 'check b.json', 'submit c.json']);
    await port.close();
    expect(log.at(-1)).toBe('close');
  });

  it('tries a failed start again on the next use', async () => {
    const log: string[] = [];
    let starts = 0;
    const port = lazyPublisher(async () => {
      if (++starts === 1) throw new Error('Redis away');
      return fakePublisher(log);
    });
    await expect(port.submit('a.json', bytes, new Date())).rejects.toThrow('Redis away');
    await expect(port.submit('a.json', bytes, new Date())).resolves.toEqual({ outcome: 'pending' });
    expect(starts).toBe(2);
  });

  it('a close before any use starts nothing, and a use after the close is refused', async () => {
    let starts = 0;
    const port = lazyPublisher(async () => {
      starts++;
      return fakePublisher([]);
    });
    await port.close();
    await expect(port.submit('a.json', bytes, new Date())).rejects.toThrow('closed');
    expect(starts).toBe(0);
  });
});
