/**
 * The change feed end to end, against `oddsfiles start` and real Redis: /v1/catalog, the
 * long-poll of /v1/changes and the server-sent events of /v1/stream, each key seeing only its
 * files; resuming with Last-Event-ID (also from a second reader process, and after a SIGKILL);
 * positions out of reach (410), bad ones (400); the per-key stream limit; revocation ending a
 * stream at once; heartbeats; a client that stops reading dropped without hurting the others.
 */
import { writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drop } from '../../helpers/drops.js';
import { docFor, sleep } from '../../helpers/faults.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';
import { openSse, type SseClient, type SseEvent } from '../../helpers/sse.js';

const LIVE = 'site_live_northwind_soccer.json';
const LIVE2 = 'site_live_bluewater_tennis.json';
const PREGAME = 'site_pregame_northwind_soccer.json';
const feedOf = (name: string) => {
  const [, kind, bookmaker, sport] = /^site_(live|pregame)_([a-z]+)_([a-z]+)\.json$/.exec(name)!;
  return { filename: name, kind: kind!, bookmaker: bookmaker!, sport: sport! };
};

interface Change {
  position: number;
  filename: string;
  etag: string;
  previous_etag: string | null;
  sha256: string;
  size: number;
  generated_at: string;
  published_at: string;
}
const changeOf = (e: SseEvent) => JSON.parse(e.data) as Change;

describe('the change feed end to end', () => {
  const prefix = uniquePrefix('e2e-changes');
  let dataDir: string;
  let env: Record<string, string>;
  let svc: RunningOddsfiles;
  let second: RunningOddsfiles | undefined;
  let redis: Redis;
  const keys: Record<string, string> = {};
  const opened: SseClient[] = [];
  let clock = Date.parse('2026-11-25T12:00:00Z');

  const get = (path: string, key: string, headers: Record<string, string> = {}, base = svc.url!) =>
    fetch(`${base}${path}`, { headers: { 'x-api-key': key, ...headers } });
  const stream = async (key: string, headers: Record<string, string> = {}, base = svc.url!, query = '') => {
    const c = await openSse(`${base}/v1/stream${query}`, { 'x-api-key': key, ...headers });
    opened.push(c);
    return c;
  };
  const publish = async (name: string) => {
    clock += 1000;
    await drop(join(dataDir, 'inbox'), name, docFor(feedOf(name), clock));
  };

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-changes');
    await writeFile(
      join(dataDir, 'oddsfiles.yaml'),
      [
        'plans:',
        '  free: { allow: ["site_pregame_*"], rate: { max: 100000, per: 1m } }',
        '  pro: { allow: ["*"], rate: { max: 100000, per: 1m }, streams: 3 }',
        '  counted: { allow: ["*"], rate: { max: 50, per: 1m } }',
        '  one: { allow: ["*"], rate: { max: 100000, per: 1m }, streams: 1 }',
        'changes: { heartbeat: 300ms, max_wait: 20s, max_buffered_bytes: 65536, stream_lease: 2s }',
        '',
      ].join('\n'),
    );
    env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    for (const [name, plan] of [
      ['pro', 'pro'],
      ['free', 'free'],
      ['counted', 'counted'],
      ['revoked', 'pro'],
    ]) {
      const res = await runCli(env, ['keys', 'create', '--name', name!, '--plan', plan!]);
      expect(res.code, res.stderr).toBe(0);
      keys[name!] = res.stdout.trim();
    }
    redis = new Redis(TEST_REDIS_URL);
  }, 60_000);

  afterAll(async () => {
    for (const c of opened) c.close();
    await second?.stop();
    await svc?.stop();
    redis?.disconnect();
    await dropPrefix(prefix);
  });

  it('starts from the catalog, pushes each change to the keys that may read it, and the file is served as announced', async () => {
    const start = await get('/v1/catalog', keys.pro!);
    expect(start.status).toBe(200);
    const catalog = (await start.json()) as { position: number; files: unknown[] };
    expect(catalog).toEqual({ position: 0, files: [] });

    const pro = await stream(keys.pro!);
    const free = await stream(keys.free!);
    expect(pro.status).toBe(200);
    expect(pro.headers['content-type']).toMatch(/^text\/event-stream/);
    // HTTP/1.1: no chunk framing; the stream ends with its connection.
    expect(pro.headers['transfer-encoding']).toBeUndefined();
    expect(pro.headers.connection).toBe('close');
    await publish(LIVE);
    await publish(PREGAME);
    // Both drops were in the inbox at once: either may be published first.
    const first = changeOf(await pro.next((e) => e.event === 'change' && changeOf(e).filename === LIVE));
    const second_ = changeOf(await pro.next((e) => e.event === 'change' && changeOf(e).filename === PREGAME));
    expect(first.previous_etag).toBeNull();
    expect([first.position, second_.position].sort()).toEqual([1, 2]);
    expect(pro.events.filter((e) => e.event === 'change').map((e) => e.id)).toEqual(['1', '2']);
    expect(pro.retry).toBeGreaterThan(0);

    // The free key sees the pregame file only.
    const onlyPregame = changeOf(await free.next((e) => e.event === 'change'));
    expect(onlyPregame.filename).toBe(PREGAME);
    await sleep(200);
    expect(free.events.filter((e) => e.event === 'change')).toHaveLength(1);

    // Announced: already served, with its time facts in the headers.
    const data = await get(`/v1/data/${LIVE}`, keys.pro!, { 'accept-encoding': 'identity' });
    expect(data.status).toBe(200);
    expect(data.headers.get('etag')).toBe(first.etag);
    expect(data.headers.get('generated-at')).toBe(first.generated_at);
    expect(data.headers.get('last-modified')).toBe(new Date(first.published_at).toUTCString());

    const after = (await (await get('/v1/catalog', keys.free!)).json()) as { position: number; files: { filename: string; etag: string }[] };
    expect(after.position).toBe(2);
    expect(after.files).toEqual([expect.objectContaining({ filename: PREGAME, etag: second_.etag, size: second_.size, generated_at: second_.generated_at })]);
  });

  it('a new version names the one it replaced, and heartbeats keep a quiet stream open', async () => {
    const pro = await stream(keys.pro!);
    const before = (await (await get('/v1/catalog', keys.pro!)).json()) as { files: { filename: string; etag: string }[] };
    const old = before.files.find((f) => f.filename === LIVE)!.etag;
    await publish(LIVE);
    const next = changeOf(await pro.next((e) => e.event === 'change'));
    expect(next.previous_etag).toBe(old);
    await sleep(800);
    expect(pro.comments).toBeGreaterThanOrEqual(2);
  });

  it('long-polls: answers at once when there are changes, holds the request until one comes, counts once', async () => {
    const all = await get('/v1/changes?since=0', keys.pro!);
    expect(all.status).toBe(200);
    const body = (await all.json()) as { changes: Change[]; next: number };
    expect(body.changes.map((c) => c.position)).toEqual([...body.changes.map((c) => c.position)].sort((a, b) => a - b));
    expect(body.changes.length).toBeGreaterThanOrEqual(3);
    const head = body.next;

    const remainingBefore = Number((await get('/v1/files', keys.counted!)).headers.get('ratelimit-remaining'));
    const t0 = Date.now();
    const waiting = get(`/v1/changes?since=${head}&wait=15`, keys.counted!);
    await sleep(500);
    await publish(LIVE2);
    const res = await waiting;
    const waited = Date.now() - t0;
    expect(res.status).toBe(200);
    const got = (await res.json()) as { changes: Change[]; next: number };
    expect(got.changes.map((c) => c.filename)).toEqual([LIVE2]);
    expect(got.next).toBe(got.changes[0]!.position);
    expect(waited).toBeGreaterThanOrEqual(400);
    expect(waited).toBeLessThan(10_000);
    // One long-poll, however long it waited, is one request against the rate.
    expect(Number(res.headers.get('ratelimit-remaining'))).toBe(remainingBefore - 1);

    // Nothing for this key within the wait: an empty answer whose next moves past what it skipped.
    const quiet = (await (await get(`/v1/changes?since=${head}&wait=1`, keys.free!)).json()) as { changes: Change[]; next: number };
    expect(quiet.changes).toEqual([]);
    expect(quiet.next).toBe(got.next);
  });

  it('refuses positions it cannot resume from: 410 with the oldest and current position; 400 for garbage', async () => {
    const ahead = await get('/v1/changes?since=999999', keys.pro!);
    expect(ahead.status).toBe(410);
    expect(ahead.headers.get('content-type')).toBe('application/problem+json');
    const problem = (await ahead.json()) as { type: string; detail: string; oldest: number; position: number };
    expect(problem.type).toBe('https://oddsfiles.dev/problems/position-gone');
    expect(problem.oldest).toBe(1);
    expect(problem.position).toBeGreaterThan(0);
    // Said as it is: ahead of the newest position, which the detail names.
    expect(problem.detail).toContain(`Position 999999 is ahead of the newest position, ${problem.position}`);
    expect(problem.detail).not.toMatch(/started again/);
    for (const bad of ['abc', '-1', '1.5', '9'.repeat(30)])
      expect((await get(`/v1/changes?since=${encodeURIComponent(bad)}`, keys.pro!)).status, bad).toBe(400);
    expect((await get('/v1/changes?since=0&wait=61', keys.pro!)).status).toBe(400);
    expect((await get('/v1/changes?since=0&limit=0', keys.pro!)).status).toBe(400);
    const sseBad = await stream(keys.pro!, { 'last-event-id': 'nonsense' });
    expect(sseBad.status).toBe(400);
    expect((await stream(keys.pro!, { 'last-event-id': '999999' })).status).toBe(410);
    expect((await fetch(`${svc.url}/v1/stream`)).status).toBe(401);
  });

  it('resumes with Last-Event-ID: every change missed, in order, none twice, also from another reader process', async () => {
    // The key's earlier streams closed: its plan's 3 count on every reader together, and are
    // free again once the reader has seen them close (429 until then).
    for (const c of opened.splice(0)) c.close();
    const log = (await (await get('/v1/changes?since=0&limit=1000', keys.pro!)).json()) as { changes: Change[] };
    const from = log.changes[0]!.position;
    const resumed = await waitFor(
      async () => {
        const c = await stream(keys.pro!, { 'last-event-id': String(from) });
        if (c.status === 200) return c;
        c.close();
        return undefined;
      },
      20_000,
      "the key's stream slots free again",
      200,
    );
    const expected = log.changes.slice(1).map((c) => String(c.position));
    await resumed.next((e) => e.id === expected.at(-1), 30_000);
    expect(resumed.events.filter((e) => e.event === 'change').map((e) => e.id)).toEqual(expected);

    second = await startOddsfiles({ ...env, PORT: '0' }, ['start', '--roles', 'reader']);
    const there = await stream(keys.pro!, {}, second.url!, `?since=${from}`);
    await there.next((e) => e.id === expected.at(-1), 30_000);
    expect(there.events.filter((e) => e.event === 'change').map((e) => e.id)).toEqual(expected);
  });

  it("limits open streams per key (counted as rate-limited), logs and counts a stream its client closed, and ends a revoked key's streams at once", async () => {
    for (const c of opened.splice(0)) c.close();
    await sleep(200);
    const held = [await stream(keys.revoked!), await stream(keys.revoked!), await stream(keys.revoked!)];
    expect(held.map((c) => c.status)).toEqual([200, 200, 200]);
    const metric = async (re: RegExp) => Number(re.exec(await (await fetch(`${svc.url}/metrics`)).text())?.[1] ?? 0);
    const refused = /^oddsfiles_rate_limited_total\{scope="streams"[^}]*\} (\d+)$/m;
    const refusedBefore = await metric(refused);
    const over = await stream(keys.revoked!);
    expect(over.status).toBe(429);
    // Counted with the other 429s.
    expect(await metric(refused)).toBe(refusedBefore + 1);
    // A stream its client closes gets its request line and its count, once, like any answer.
    const served = /^oddsfiles_http_requests_total\{route="\/v1\/stream",method="GET",status="200"[^}]*\} (\d+)$/m;
    const servedBefore = await metric(served);
    const created = await runCli(env, ['keys', 'create', '--name', 'closer', '--plan', 'pro']);
    expect(created.code, created.stderr).toBe(0);
    const listed = await runCli(env, ['keys', 'list', '--json']);
    const closerId = (JSON.parse(listed.stdout) as { id: string; name: string }[]).find((k) => k.name === 'closer')!.id;
    // A new key reaches the reader within a second (pub/sub): wait for it.
    await expect.poll(async () => (await get('/v1/files', created.stdout.trim())).status, { timeout: 5000, interval: 100 }).toBe(200);
    const closing = await stream(created.stdout.trim());
    expect(closing.status).toBe(200);
    const closedLines = () => svc.logs.filter((l) => l.url === '/v1/stream' && l.status === 200 && l.keyId === closerId && l.ip === '127.0.0.1').length;
    closing.close();
    await svc.waitForLog(() => closedLines() > 0, 5000);
    await expect.poll(() => metric(served), { timeout: 5000 }).toBe(servedBefore + 1);
    await sleep(300);
    expect(closedLines()).toBe(1);
    expect(await metric(served)).toBe(servedBefore + 1);
    const revoke = await runCli(env, ['keys', 'revoke', 'revoked']);
    expect(revoke.code, revoke.stderr).toBe(0);
    for (const c of held) {
      await c.next((e) => e.event === 'revoked', 5000);
      await c.ended;
    }
    expect((await stream(keys.revoked!)).status).toBe(401);
  });

  it("counts a key's streams across readers; the slots of a reader killed with its streams open lapse after changes.stream_lease", async () => {
    const created = await runCli(env, ['keys', 'create', '--name', 'one', '--plan', 'one']);
    expect(created.code, created.stderr).toBe(0);
    const key = created.stdout.trim();
    await expect.poll(async () => (await get('/v1/files', key)).status, { timeout: 5000, interval: 100 }).toBe(200);
    const other = await startOddsfiles({ ...env, PORT: '0' }, ['start', '--roles', 'reader']);
    try {
      // A stream ended by its client gives its slot back at once, to any reader.
      const first = await stream(key);
      expect(first.status).toBe(200);
      expect((await stream(key, {}, other.url!)).status).toBe(429);
      first.close();
      await expect.poll(async () => (await stream(key, {}, other.url!)).status, { timeout: 3000, interval: 100 }).toBe(200);
      // Now held on the other reader, which dies without closing it.
      expect((await stream(key)).status).toBe(429);
      await other.kill();
      const killedAt = Date.now();
      await expect.poll(async () => (await stream(key)).status, { timeout: 10_000, interval: 250 }).toBe(200);
      // Not before the lease (2 s) lapsed: the slot was held in Redis, not only by the dead reader.
      expect(Date.now() - killedAt).toBeGreaterThan(1000);
    } finally {
      await other.kill();
    }
  });

  it('drops a client that stops reading, with a clear event, and keeps serving the others', async () => {
    // A client that sends its request and never reads.
    const url = new URL(svc.url!);
    const stalled = connect(Number(url.port), url.hostname);
    await new Promise<void>((r) => stalled.once('connect', () => r()));
    stalled.write(`GET /v1/stream HTTP/1.1\r\nHost: ${url.host}\r\nX-API-Key: ${keys.pro}\r\n\r\n`);
    stalled.pause();
    const reading = await stream(keys.pro!);
    await sleep(300);

    // Many changes at once, straight into the log (files this reader does not serve are announced at once).
    const seq = Number(await redis.get(`${prefix}:catalog:seq`));
    const n = 6000;
    const pipe = redis.pipeline();
    const pad = 'x'.repeat(600);
    for (let i = 1; i <= n; i++) {
      const entry = {
        filename: `site_live_nobody_${i}.json`,
        sha256: i.toString(16).padStart(64, '0'),
        size: i,
        generatedAt: pad,
        publishedAt: new Date().toISOString(),
        generatedAtMs: 0,
      };
      pipe.xadd(`${prefix}:catalog:log`, `${seq + i}-0`, 'e', JSON.stringify(entry), 'p', '', 't', String(Date.now()));
    }
    pipe.set(`${prefix}:catalog:seq`, String(seq + n));
    await pipe.exec();

    await reading.next((e) => e.id === String(seq + n), 30_000);
    expect(reading.events.filter((e) => e.event === 'change' && Number(e.id) > seq)).toHaveLength(n);
    expect(reading.events.some((e) => e.event === 'dropped')).toBe(false);
    // The stalled client is dropped after two heartbeats behind: reading what it was sent ends with the `dropped` event.
    const dropped = async () => /^oddsfiles_stream_dropped_total(\{[^}]*\})? 1$/m.test(await (await fetch(`${svc.url}/metrics`)).text());
    await waitFor(dropped, 10_000, 'the stalled stream to be dropped');
    let text = '';
    stalled.setEncoding('utf8').on('data', (c: string) => (text += c));
    stalled.resume();
    await waitFor(async () => stalled.destroyed || stalled.readableEnded || text.includes('event: dropped'), 10_000, 'the stalled stream to end');
    await sleep(200);
    expect(text).toContain('event: dropped');
    stalled.destroy();
    // `status` shows the readers' figures (each reader shares them every few seconds).
    await waitFor(
      async () => {
        const res = await runCli(env, ['status', '--json']);
        const c = (JSON.parse(res.stdout) as { changes: { position: number; readers: number; streams: number; events: number; dropped: number } }).changes;
        return c.position === seq + n && c.readers === 2 && c.dropped === 1 && c.events >= n && c.streams >= 1;
      },
      15_000,
      'status to show the change figures',
    );
  }, 60_000);

  it('after a SIGKILL, a client resuming with Last-Event-ID gets what was published meanwhile', async () => {
    const before = (await (await get('/v1/catalog', keys.pro!)).json()) as { position: number };
    await second?.kill();
    second = undefined;
    await svc.kill();
    // Published while no reader runs: the drops wait in the inbox for the next start.
    await publish(PREGAME);
    await publish(LIVE);
    svc = await startOddsfiles(env);
    const resumed = await stream(keys.pro!, { 'last-event-id': String(before.position) });
    // The two drops were in the inbox together at the start: either may be published first.
    await resumed.next((e) => e.id === String(before.position + 2), 20_000);
    const changes = resumed.events.filter((e) => e.event === 'change').map(changeOf);
    expect(changes.map((c) => c.position)).toEqual([before.position + 1, before.position + 2]);
    expect(changes.map((c) => c.filename).sort()).toEqual([LIVE, PREGAME]);
  }, 60_000);
});
