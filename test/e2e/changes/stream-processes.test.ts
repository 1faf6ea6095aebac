/**
 * `oddsfiles start --roles reader --processes 2`: two reader processes on one port. Streams
 * through a SIGKILL of one of them: its clients resume with Last-Event-ID on the other (or its
 * replacement, which the supervisor starts), and every client gets every change once, in order.
 * A key's stream limit holds across both processes. SIGTERM stops the supervisor and both.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drop } from '../../helpers/drops.js';
import { docFor, sleep } from '../../helpers/faults.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';
import { openSse, type SseClient } from '../../helpers/sse.js';

const A = 'site_live_northwind_soccer.json';

/** A client that reconnects with Last-Event-ID whenever its stream ends, as EventSource does. */
function resumingClient(url: string, key: string) {
  const ids: number[] = [];
  let current: SseClient | undefined;
  let reconnects = 0;
  let closed = false;
  const run = async () => {
    while (!closed) {
      const last = ids.at(-1);
      try {
        const c = await openSse(`${url}/v1/stream`, { 'x-api-key': key, ...(last === undefined ? {} : { 'last-event-id': String(last) }) });
        current = c;
        if (c.status !== 200) throw new Error(`status ${c.status}`);
        let seen = 0;
        const take = () => {
          for (; seen < c.events.length; seen++) if (c.events[seen]!.event === 'change') ids.push(Number(c.events[seen]!.id));
        };
        const timer = setInterval(take, 20);
        await c.ended;
        clearInterval(timer);
        take();
      } catch {
        // Refused or reset while the process went: try again.
      }
      if (closed) return;
      reconnects++;
      await sleep(100);
    }
  };
  const done = run();
  return {
    ids,
    get reconnects() {
      return reconnects;
    },
    async close() {
      closed = true;
      current?.close();
      await done;
    },
  };
}

describe('reader processes sharing a port', () => {
  const prefix = uniquePrefix('e2e-stream-processes');
  let dataDir: string;
  let env: Record<string, string>;
  let ingest: RunningOddsfiles;
  let readers: RunningOddsfiles;
  let key: string;
  let clock = Date.now() - 3_600_000;

  /** The change position (asked again when the connection went with a killed process). */
  const position = () =>
    waitFor(
      async () =>
        ((await (await fetch(`${readers.url}/v1/catalog`, { headers: { 'x-api-key': key, connection: 'close' } })).json()) as { position: number }).position +
        1,
      10_000,
      'the catalog',
    ).then((p) => p - 1);
  /** Publish a new version and wait until a reader has it (one drop at a time: none replaces another). */
  const publish = async () => {
    const before = await position();
    clock += 1000;
    await drop(join(dataDir, 'inbox'), A, docFor({ filename: A, bookmaker: 'northwind', sport: 'soccer' }, clock));
    await waitFor(async () => (await position()) > before, 20_000, 'the change published');
  };

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-stream-processes');
    await writeFile(
      join(dataDir, 'oddsfiles.yaml'),
      [
        'plans:',
        '  pro: { allow: ["*"], rate: { max: 1000000, per: 1m }, streams: 40 }',
        '  one: { allow: ["*"], rate: { max: 1000000, per: 1m }, streams: 1 }',
        '',
      ].join('\n'),
    );
    env = baseEnv(dataDir, prefix);
    ingest = await startOddsfiles(env, ['start', '--roles', 'watcher,worker']);
    readers = await startOddsfiles(env, ['start', '--roles', 'reader', '--processes', '2']);
    await readers.waitForLog((l) => l.msg === 'oddsfiles started' && l.processes === 2, 30_000);
    key = (await runCli(env, ['keys', 'create', '--name', 'pro', '--plan', 'pro'])).stdout.trim();
    await waitFor(async () => (await fetch(`${readers.url}/v1/files`, { headers: { 'x-api-key': key } })).status === 200, 10_000, 'the key on the readers');
  }, 90_000);

  afterAll(async () => {
    await readers?.stop();
    await ingest?.stop();
    await dropPrefix(prefix);
  });

  it('carries streams through a SIGKILL of one process: every change once, in order', async () => {
    const pids = () => [...new Set(readers.logs.filter((l) => l.msg === 'reader process started').map((l) => [l.index, l.pid] as const))];
    const first = pids();
    expect(first.map(([i]) => i).sort()).toEqual([0, 1]);
    // Sixteen connections: the kernel spreads them over both processes (all on one: 2 in 65,536).
    const clients = Array.from({ length: 16 }, () => resumingClient(readers.url!, key));
    await sleep(1000);
    const start = await position();
    for (let i = 0; i < 3; i++) await publish();
    await expect.poll(() => clients.every((c) => c.ids.length >= 3), { timeout: 20_000 }).toBe(true);

    const victim = first.find(([i]) => i === 0)![1] as number;
    process.kill(victim, 'SIGKILL');
    for (let i = 0; i < 3; i++) await publish();
    // The supervisor starts another in its place.
    await readers.waitForLog((l) => l.msg === 'reader process started' && l.index === 0 && l.pid !== victim, 30_000);
    for (let i = 0; i < 3; i++) await publish();

    const want = Array.from({ length: 9 }, (_, i) => start + 1 + i);
    await expect.poll(() => clients.every((c) => c.ids.length >= 9), { timeout: 30_000 }).toBe(true);
    await sleep(300);
    for (const c of clients) await c.close();
    for (const c of clients) expect(c.ids).toEqual(want);
    // Some were on the process that was killed, and came back.
    expect(clients.some((c) => c.reconnects > 0)).toBe(true);
    expect(readers.logs.some((l) => l.msg === 'reader process exited: starting another' && l.signal === 'SIGKILL')).toBe(true);
  }, 120_000);

  it('runs reader processes only', async () => {
    const r = await runCli(env, ['start', '--roles', 'reader,worker', '--processes', '2']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--processes runs reader processes only/);
  });

  it("holds a key's stream limit across the processes", async () => {
    const one = (await runCli(env, ['keys', 'create', '--name', 'one', '--plan', 'one'])).stdout.trim();
    await expect.poll(async () => (await fetch(`${readers.url}/v1/files`, { headers: { 'x-api-key': one } })).status, { timeout: 10_000 }).toBe(200);
    const held = await openSse(`${readers.url}/v1/stream`, { 'x-api-key': one });
    expect(held.status).toBe(200);
    // Whichever process each lands on (new connections are spread), the second is refused.
    for (let i = 0; i < 6; i++) {
      const over = await fetch(`${readers.url}/v1/stream`, { headers: { 'x-api-key': one, connection: 'close' } });
      expect(over.status).toBe(429);
      await over.body?.cancel();
    }
    held.close();
  });
});
