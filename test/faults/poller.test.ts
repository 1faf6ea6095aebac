/**
 * The fault tests' poller must catch what it is there to catch: a test of the test. A fake reader
 * serves, in turn, a version, an older one, a torn body, bytes never dropped, and a 404: each is a
 * violation. Answers that merely overtake each other on parallel connections are not.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { VersionBook, docFor, sleep, startPoller } from '../helpers/faults.js';

const FEED = { filename: 'site_live_northwind_soccer.json', bookmaker: 'northwind', sport: 'soccer' };

describe('the poller of the fault tests', () => {
  const servers: ReturnType<typeof createServer>[] = [];
  afterAll(() => servers.forEach((s) => s.close()));

  const serve = async (answer: (n: number) => { status: number; body: Buffer | string; delayMs?: number }) => {
    let n = 0;
    const server = createServer((_req, res) => {
      const a = answer(n++);
      setTimeout(() => res.writeHead(a.status, { 'content-type': 'application/json' }).end(a.body), a.delayMs ?? 0);
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };

  it('reports a regression, a torn body, unknown bytes and a 404 after a 200', async () => {
    const book = new VersionBook();
    const v1 = docFor(FEED, Date.parse('2026-11-20T00:00:00Z'));
    const v2 = docFor(FEED, Date.parse('2026-11-20T00:00:01Z'));
    book.add(FEED.filename, v1, Date.parse('2026-11-20T00:00:00Z'));
    book.add(FEED.filename, v2, Date.parse('2026-11-20T00:00:01Z'));
    const script = [
      { status: 200, body: v2 },
      { status: 200, body: v1 },
      { status: 200, body: v2.subarray(0, 10) },
      { status: 200, body: docFor(FEED, Date.parse('2026-11-20T00:00:02Z')) },
      { status: 404, body: '{}' },
    ];
    const url = await serve((n) => script[Math.min(n, script.length - 1)]!);
    const poller = startPoller({ url: () => url, key: 'k', names: [FEED.filename], book, loops: 1 });
    await sleep(300);
    const report = await poller.stop();
    const text = report.violations.join('\n');
    expect(text).toMatch(/went back/);
    expect(text).toMatch(/torn/);
    expect(text).toMatch(/matches no dropped version/);
    expect(text).toMatch(/404 after it was served/);
  });

  it('does not report an older answer to a request sent before the newer answer arrived', async () => {
    const book = new VersionBook();
    const v1 = docFor(FEED, Date.parse('2026-11-20T00:00:00Z'));
    const v2 = docFor(FEED, Date.parse('2026-11-20T00:00:01Z'));
    book.add(FEED.filename, v1, Date.parse('2026-11-20T00:00:00Z'));
    book.add(FEED.filename, v2, Date.parse('2026-11-20T00:00:01Z'));
    // The first request is answered (old version) after the second one (new version).
    const url = await serve((n) => (n === 0 ? { status: 200, body: v1, delayMs: 150 } : { status: 200, body: v2 }));
    const poller = startPoller({ url: () => url, key: 'k', names: [FEED.filename], book, loops: 2 });
    await sleep(400);
    const report = await poller.stop();
    expect(report.violations).toEqual([]);
    expect(report.ok).toBeGreaterThan(2);
  });
});
