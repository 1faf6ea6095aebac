/**
 * The reads a request makes of Redis while Redis is away, against `oddsfiles start` (every role)
 * and a private redis-server (never the shared one): the change feed's older past (`/v1/changes`
 * from a position other than the head, with and without `wait`; `/v1/stream` resumed from an old
 * Last-Event-ID), a file's history (listed, `at`, one version by ETag) and the queue dashboard's
 * API answer 503 problem+json with Retry-After within their bound (REDIS_READ_BOUND_MS, 3 s;
 * the dashboard's, 5 s), whether Redis is stopped (before: 500 at once, or no answer) or paused
 * (before: no answer until it resumed). Files and data are served meanwhile, and once Redis is
 * back the same requests answer 200. A position among the changes the reader holds in memory is
 * answered from there while Redis is away (within the bound when Redis is paused).
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXAMPLE_FEEDS } from '../fixtures/corpus.js';
import { docFor, dropFile, freePort, sleep, startPrivateRedis, type PrivateRedis } from '../helpers/faults.js';
import { uniquePrefix } from '../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';

const ADMIN_TOKEN = 'adm-redis-reads-correct-horse-battery';
/** The bounds of src/reader/redis-reads.ts and src/ops/dashboard.ts. */
const READ_BOUND_MS = 3000;
const DASHBOARD_BOUND_MS = 5000;
/** Room for a busy 2-core machine: the outcome matters, not the exact time. */
const SLACK_MS = 5000;
/** The client gives up here: an answer still missing then is a hang. */
const CLIENT_TIMEOUT_MS = 20_000;
const FILE = EXAMPLE_FEEDS[0]!;

interface Outcome {
  readonly status: number;
  readonly retryAfter: string | null;
  readonly contentType: string | null;
  readonly body: string;
  readonly ms: number;
}

describe('fault: reads of Redis while Redis is away', () => {
  let redis: PrivateRedis | undefined;
  let svc: RunningOddsfiles | undefined;

  afterAll(async () => {
    // Never left stopped: resumed, then stopped for good.
    redis?.resume();
    await svc?.kill();
    await redis?.stop();
  });

  it('answers 503 with Retry-After within the bound for the change log, history and dashboard reads, and serves data meanwhile', async () => {
    const dataDir = await makeDataDir('faults-redis-reads');
    const inbox = join(dataDir, 'inbox');
    redis = await startPrivateRedis(join(dataDir, 'private-redis'));
    const configFile = join(dataDir, 'oddsfiles.yaml');
    await writeFile(configFile, 'plans:\n  pro: { allow: ["*"], history: 24h }\n');
    const env = baseEnv(dataDir, uniquePrefix('faults-redis-reads'), {
      REDIS_URL: redis.url,
      ODDSFILES_CONFIG: configFile,
      PORT: String(await freePort()),
      ADMIN_TOKEN,
    });
    svc = await startOddsfiles(env);
    const created = await runCli(env, ['keys', 'create', '--name', 'reader', '--plan', 'pro']);
    expect(created.code, created.stderr).toBe(0);
    const key = created.stdout.trim();
    let url = svc.url!;

    const get = async (path: string, headers: Record<string, string> = {}): Promise<Outcome> => {
      const ctrl = new AbortController();
      const timer = setTimeout(() => ctrl.abort(), CLIENT_TIMEOUT_MS);
      const t0 = performance.now();
      try {
        const res = await fetch(`${url}${path}`, { headers, signal: ctrl.signal });
        // A stream that opened is not read to its end.
        const body = res.headers.get('content-type')?.startsWith('text/event-stream') ? '' : await res.text();
        return {
          status: res.status,
          retryAfter: res.headers.get('retry-after'),
          contentType: res.headers.get('content-type'),
          body,
          ms: performance.now() - t0,
        };
      } catch (err) {
        // No answer within CLIENT_TIMEOUT_MS (or the connection failed): status 0.
        return { status: 0, retryAfter: null, contentType: null, body: String(err), ms: performance.now() - t0 };
      } finally {
        clearTimeout(timer);
        ctrl.abort();
      }
    };
    const api = { 'x-api-key': key };

    // Four versions of one file, then one of another: positions 1..5, and a history to read.
    let t = Date.now() - 600_000;
    const publish = async (feed: (typeof EXAMPLE_FEEDS)[number], position: number) => {
      await dropFile(inbox, feed.filename, docFor(feed, (t += 1000)));
      await waitFor(
        async () => {
          const res = await fetch(`${url}/v1/catalog`, { headers: api });
          return res.status === 200 && ((await res.json()) as { position: number }).position >= position;
        },
        20_000,
        `position ${position}`,
      );
    };
    for (let p = 1; p <= 4; p++) await publish(FILE, p);
    await publish(EXAMPLE_FEEDS[1]!, 5);
    const listed = await get(`/v1/history/${FILE.filename}`, api);
    expect(listed.status, listed.body).toBe(200);
    const versions = (JSON.parse(listed.body) as { versions: { etag: string; published_at: string }[] }).versions;
    expect(versions).toHaveLength(4);
    const older = versions[2]!;
    // A reader holds the recent changes in memory, and answers positions among them from there when
    // Redis is away: restarted, it holds none of positions 1..5, so resuming from them needs Redis;
    // it holds the one change after the restart, so resuming from 5 does not.
    expect(await svc.stop()).toBe(0);
    svc = await startOddsfiles(env);
    url = svc.url!;
    await publish(EXAMPLE_FEEDS[2]!, 6);

    /** Each read that goes to Redis, with the bound it is answered within. */
    const redisReads: [name: string, path: string, headers: Record<string, string>, boundMs: number][] = [
      ['changes from an old position', '/v1/changes?since=1', api, READ_BOUND_MS],
      ['changes from an old position, waiting', '/v1/changes?since=1&wait=5', api, READ_BOUND_MS],
      ['history list', `/v1/history/${FILE.filename}`, api, READ_BOUND_MS],
      ['history at a moment', `/v1/history/${FILE.filename}?at=${encodeURIComponent(older.published_at)}`, api, READ_BOUND_MS],
      ['history version by etag', `/v1/history/${FILE.filename}/${older.etag.replaceAll('"', '')}`, api, READ_BOUND_MS],
      ['stream from an old Last-Event-ID', '/v1/stream', { ...api, 'last-event-id': '1', accept: 'text/event-stream' }, READ_BOUND_MS],
      ['dashboard API', '/admin/queues/api/queues', { authorization: `Bearer ${ADMIN_TOKEN}` }, DASHBOARD_BOUND_MS],
    ];
    const servedFromMemory: [name: string, path: string][] = [
      ['data', `/v1/data/${FILE.filename}`],
      ['files', '/v1/files'],
      ['changes from a position the reader holds', '/v1/changes?since=5'],
    ];

    const allAnswer200 = async (when: string) => {
      for (const [name, path, headers] of redisReads) {
        const res = await waitFor(
          async () => {
            const r = await get(path, headers);
            return r.status === 200 ? r : undefined;
          },
          30_000,
          `${name} answering 200 ${when}`,
        );
        expect(res.status, `${name} ${when}`).toBe(200);
      }
    };
    /** Every Redis read at once: 503 problem+json with Retry-After within its bound; data still 200. */
    const allUnavailable = async (when: string) => {
      const [reads, memory] = await Promise.all([
        Promise.all(redisReads.map(([, path, headers]) => get(path, headers))),
        Promise.all(servedFromMemory.map(([, path]) => get(path, api))),
      ]);
      const seen = Object.fromEntries(redisReads.map(([name], i) => [name, `${reads[i]!.status} in ${Math.round(reads[i]!.ms)} ms`]));
      console.log(`${when}: ${JSON.stringify(seen)}`);
      // Soft: every request's outcome is reported, not only the first that fails.
      redisReads.forEach(([name, , , boundMs], i) => {
        const r = reads[i]!;
        expect.soft(r.status, `${name} ${when}: ${r.body}`).toBe(503);
        expect.soft(r.contentType, `${name} ${when}`).toMatch(/^application\/problem\+json/);
        expect.soft(Number(r.retryAfter), `${name} ${when}: Retry-After`).toBeGreaterThan(0);
        expect.soft(r.ms, `${name} ${when}: answered within the bound`).toBeLessThan(boundMs + SLACK_MS);
      });
      servedFromMemory.forEach(([name, path], i) => {
        expect.soft(memory[i]!.status, `${name} ${when}: ${memory[i]!.body}`).toBe(200);
        if (path.startsWith('/v1/changes')) expect.soft(memory[i]!.body, `${name} ${when}`).toMatch(/"position":6/);
        // The changes ask Redis first: a paused one holds them for the bound.
        expect.soft(memory[i]!.ms, `${name} ${when}: not held by Redis`).toBeLessThan((path.startsWith('/v1/changes') ? READ_BOUND_MS : 0) + SLACK_MS);
      });
    };

    await allAnswer200('with Redis up');

    // Stopped: connections refused; the command connection fails its commands at once.
    await redis.stop();
    await sleep(300);
    await allUnavailable('with Redis stopped');
    await redis.start();
    await allAnswer200('once Redis is back after a stop');

    // Paused: connections open, nothing answers.
    redis.pause();
    try {
      await allUnavailable('with Redis paused');
    } finally {
      redis.resume();
    }
    await allAnswer200('once Redis is back after a pause');
    // Nothing failed on the way: no request logged as failed (a 500), no late answer sent twice.
    expect(svc.logs.filter((l) => (l.level ?? 0) >= 50 || /already sent/i.test(String(l.msg)))).toEqual([]);
  }, 240_000);
});
