/**
 * GET /v1/stream?conflate=MS against `oddsfiles start`: a stream that was just written to holds
 * what comes next, only the latest change of each file, until its window ends; a resumed stream
 * catches up with the latest change of each file, in position order; a plan's `conflate` is the
 * least a key gets; a malformed or out-of-range conflate is 400. Positions keep increasing.
 */
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drop } from '../../helpers/drops.js';
import { docFor } from '../../helpers/faults.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';
import { openSse, type SseClient, type SseEvent } from '../../helpers/sse.js';

const A = 'site_live_northwind_soccer.json';
const B = 'site_live_bluewater_tennis.json';
const feedOf = (name: string) => {
  const [, kind, bookmaker, sport] = /^site_(live|pregame)_([a-z]+)_([a-z]+)\.json$/.exec(name)!;
  return { filename: name, kind: kind!, bookmaker: bookmaker!, sport: sport! };
};
const etagOf = (b: Buffer) => `"${createHash('sha256').update(b).digest('hex').slice(0, 32)}"`;
type Change = { position: number; filename: string; etag: string };
const changes = (events: SseEvent[]) => events.filter((e) => e.event === 'change').map((e) => JSON.parse(e.data) as Change);

describe('GET /v1/stream?conflate', () => {
  const prefix = uniquePrefix('e2e-stream-conflate');
  let dataDir: string;
  let svc: RunningOddsfiles;
  const keys: Record<string, string> = {};
  const opened: SseClient[] = [];
  let clock = Date.now() - 3_600_000;

  const stream = async (key: string, query = '', headers: Record<string, string> = {}) => {
    const c = await openSse(`${svc.url}/v1/stream${query}`, { 'x-api-key': key, ...headers });
    opened.push(c);
    return c;
  };
  /** Publish a new version of `name` and wait until it is served; its ETag. */
  const publish = async (name: string) => {
    clock += 1000;
    const bytes = docFor(feedOf(name), clock);
    await drop(join(dataDir, 'inbox'), name, bytes);
    const etag = etagOf(bytes);
    await waitFor(
      async () =>
        (await fetch(`${svc.url}/v1/data/${name}`, { method: 'HEAD', headers: { 'x-api-key': keys.pro! } })).headers.get('etag')?.startsWith(etag.slice(0, 33)),
      20_000,
      `${name} served`,
    );
    return etag;
  };

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-stream-conflate');
    await writeFile(
      join(dataDir, 'oddsfiles.yaml'),
      ['plans:', '  pro: { allow: ["*"], rate: { max: 100000, per: 1m } }', '  slow: { allow: ["*"], rate: { max: 100000, per: 1m }, conflate: 20s }', ''].join(
        '\n',
      ),
    );
    const env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    for (const plan of ['pro', 'slow']) keys[plan] = (await runCli(env, ['keys', 'create', '--name', plan, '--plan', plan])).stdout.trim();
  }, 60_000);

  afterAll(async () => {
    for (const c of opened) c.close();
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it('refuses a conflate that is not 0 to 60000 ms', async () => {
    for (const bad of ['abc', '-1', '60001', '1.5']) {
      const res = await fetch(`${svc.url}/v1/stream?conflate=${bad}`, { headers: { 'x-api-key': keys.pro! } });
      expect(res.status, bad).toBe(400);
      expect(((await res.json()) as { detail: string }).detail).toMatch(/conflate/);
    }
  });

  it('holds the changes after a write until the window ends, the latest of each file, and resumes conflated', async () => {
    const start = ((await (await fetch(`${svc.url}/v1/catalog`, { headers: { 'x-api-key': keys.pro! } })).json()) as { position: number }).position;
    const conflated = await stream(keys.pro!, '?conflate=20000');
    // The plan's conflate is the least: asking for none gets 20 s too.
    const planned = await stream(keys.slow!, '?conflate=0');
    const plain = await stream(keys.pro!);
    const first = await publish(A);
    await conflated.next((e) => e.event === 'change');
    await planned.next((e) => e.event === 'change');
    const a: string[] = [];
    const b: string[] = [];
    for (let i = 0; i < 3; i++) {
      a.push(await publish(A));
      b.push(await publish(B));
    }
    // Unconflated: every change, in order.
    await plain.next((e) => e.event === 'change' && (JSON.parse(e.data) as Change).etag === b.at(-1));
    expect(changes(plain.events).map((c) => c.etag)).toEqual([first, a[0], b[0], a[1], b[1], a[2], b[2]]);
    // Conflated: the first at once, then the latest of each file together, in position order.
    for (const c of [conflated, planned]) {
      await c.next((e) => e.event === 'change' && (JSON.parse(e.data) as Change).etag === b.at(-1), 40_000);
      const got = changes(c.events);
      expect(got.map((x) => x.etag)).toEqual([first, a[2], b[2]]);
      expect(got.map((x) => x.position)).toEqual([start + 1, start + 6, start + 7]);
    }
    // Resumed from the first change: the latest of each file at once.
    const resumed = await stream(keys.pro!, '?conflate=20000', { 'last-event-id': String(start + 1) });
    await resumed.next((e) => e.event === 'change' && (JSON.parse(e.data) as Change).etag === b.at(-1));
    expect(changes(resumed.events).map((x) => [x.filename, x.etag, x.position])).toEqual([
      [A, a[2], start + 6],
      [B, b[2], start + 7],
    ]);
  }, 120_000);
});
