/**
 * The reader's PublishPort is started on its first upload (what it loads, BullMQ and the document
 * validator, costs a reader that never takes one nothing) or when prepared (a reader holding
 * publisher keys, before it listens): started once for concurrent first uses, tried again after a
 * failed start, never started by a close, closed when it was started. Prepared only where a key
 * may publish, and a failed preparation leaves the start to the first upload.
 */
import { describe, expect, it } from 'vitest';
import { lazyPublisher, type ClosablePublisher } from '../../src/ports/lazy-publisher.js';
import { preparePublisher } from '../../src/reader/publishing/prepare.js';
import { capturingLogger } from '../helpers/log.js';

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

  it('prepare starts it once, and the uploads after it use that start', async () => {
    const log: string[] = [];
    let starts = 0;
    const port = lazyPublisher(async () => {
      starts++;
      return fakePublisher(log);
    });
    await Promise.all([port.prepare(), port.prepare()]);
    expect(starts).toBe(1);
    expect(log).toEqual([]);
    await port.submit('a.json', bytes, new Date());
    expect(starts).toBe(1);
    expect(log).toEqual(['submit a.json']);
  });
});

/** The key ring's part: how many keys may publish, and its loads. */
function fakeKeys(publishers: number) {
  const listeners = new Set<() => void>();
  return {
    publishers,
    onLoaded(l: () => void) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    /** A reload that finds `n` publisher keys. */
    load(n: number) {
      this.publishers = n;
      for (const l of [...listeners]) l();
    },
  };
}

describe('preparePublisher', () => {
  it('loads the publisher before listening when a key may publish, and never without a publisher port', async () => {
    let starts = 0;
    const port = lazyPublisher(async () => {
      starts++;
      return fakePublisher([]);
    });
    const { log } = capturingLogger('warn');
    expect(await preparePublisher(undefined, fakeKeys(3), log)).toBe(false);
    expect(await preparePublisher(port, fakeKeys(1), log)).toBe(true);
    expect(starts).toBe(1);
  });

  it('without publisher keys, loads it once the first reload brings one, and only once', async () => {
    let starts = 0;
    const port = lazyPublisher(async () => {
      starts++;
      return fakePublisher([]);
    });
    const keys = fakeKeys(0);
    const { log } = capturingLogger('warn');
    expect(await preparePublisher(port, keys, log)).toBe(false);
    keys.load(0);
    expect(starts).toBe(0);
    keys.load(2);
    keys.load(3);
    await new Promise((r) => setImmediate(r));
    expect(starts).toBe(1);
  });

  it('a load that fails is logged and left to the first upload', async () => {
    let starts = 0;
    const failing = lazyPublisher(async () => {
      if (++starts === 1) throw new Error('Redis away');
      return fakePublisher([]);
    });
    const { log, lines } = capturingLogger('warn');
    expect(await preparePublisher(failing, fakeKeys(1), log)).toBe(false);
    expect(lines.map((l) => l.msg)).toEqual(['cannot load the publisher yet; the first upload tries again']);
    await expect(failing.submit('a.json', bytes, new Date())).resolves.toEqual({ outcome: 'pending' });
    expect(starts).toBe(2);
  });
});
