/**
 * A Sentinel failover under load, against `oddsfiles start` on a Sentinel URL: a primary, a
 * replica and three sentinels on loopback ports, the catalog commit waiting for the replica
 * (redis.wait_replicas: 1). Under drops (~15/s in the folder and PUTs one after another), 100 open
 * streams and a steady reading client, the replica stalls for a moment (what the primary commits
 * meanwhile reaches no replica) and the primary is then killed with SIGKILL. Without
 * restarting any process of the service: drops publish again within 15 s of the promotion (they
 * are served; acknowledged once a replica is back: the killed server returns as one); every
 * publication acknowledged (a PUT's 201) is in the new primary's catalog and history; the reading
 * client never gets an older version of a file than it got before; every stream goes on with new
 * changes, or is told to start again (`reset`); and `status` names the new primary.
 */
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { EXAMPLE_FEEDS } from '../fixtures/corpus.js';
import {
  createApiKey,
  docFor,
  dropFile,
  freePort,
  httpGet,
  readCatalogAt,
  sleep,
  startDropStream,
  VersionBook,
  waitServesNewest,
  writeFaultConfig,
} from '../helpers/faults.js';
import { uniquePrefix } from '../helpers/redis.js';
import { startSentinelGroup, type SentinelGroup } from '../helpers/sentinel.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';
import { openSse, type SseClient } from '../helpers/sse.js';

const DROPPED = EXAMPLE_FEEDS.slice(0, 10);
const PUT = EXAMPLE_FEEDS.slice(10, 14);
const LATE = EXAMPLE_FEEDS[14]!;
const STREAMS = 100;

describe('fault: the Redis primary fails over (Sentinel)', () => {
  let group: SentinelGroup | undefined;
  let svc: RunningOddsfiles | undefined;
  const clients: SseClient[] = [];

  afterAll(async () => {
    for (const c of clients) c.close();
    await svc?.kill();
    await group?.stop();
  });

  it('keeps acknowledged publications, publishes again after the promotion and never serves an older version', async () => {
    const dataDir = await makeDataDir('faults-sentinel');
    const inbox = join(dataDir, 'inbox');
    group = await startSentinelGroup(join(dataDir, 'redis'));
    const configFile = await writeFaultConfig(
      dataDir,
      'redis: { wait_replicas: 1, wait_timeout: 2s }\nchanges: { streams_per_key: 1000 }\npublish: { rate: { max: 100000, per: 1s } }\n',
    );
    const prefix = uniquePrefix('faults-sentinel');
    const env = baseEnv(dataDir, prefix, { REDIS_URL: group.url, ODDSFILES_CONFIG: configFile, PORT: String(await freePort()) });
    svc = await startOddsfiles(env);
    const pid = svc.proc.pid;
    const url = svc.url!;
    const key = await createApiKey(env);
    const made = await runCli(env, ['keys', 'create', '--name', 'feeder', '--publish', '*']);
    expect(made.code, made.stderr).toBe(0);
    const publisher = made.stdout.trim();

    // Drops in the folder, ~15/s.
    const book = new VersionBook();
    const drops = startDropStream({ inbox, feeds: DROPPED, perSecond: 15, book, startMs: Date.now() - 3_600_000, sizes: [200, 2000] });
    // PUTs one after another: a 201 is an acknowledged publication.
    const acked: { filename: string; generatedAtMs: number }[] = [];
    let putting = true;
    let putClock = Date.now() - 3_600_000;
    const puts = (async () => {
      for (let n = 0; putting; n++) {
        const feed = PUT[n % PUT.length]!;
        const at = (putClock += 1000);
        const res = await fetch(`${url}/v1/data/${feed.filename}`, { method: 'PUT', headers: { 'x-api-key': publisher }, body: docFor(feed, at) }).catch(
          () => undefined,
        );
        if (res?.status === 201) acked.push({ filename: feed.filename, generatedAtMs: at });
        await res?.arrayBuffer().catch(() => undefined);
        if (!res || res.status >= 500) await sleep(100);
      }
    })();
    // A steady reader: per file, the generated_at it got must never go back.
    const seen = new Map<string, number>();
    const regressions: string[] = [];
    let reads = 0;
    let reading = true;
    const reader = (async () => {
      const files = [...DROPPED, ...PUT].map((f) => f.filename);
      for (let n = 0; reading; n++) {
        const name = files[n % files.length]!;
        const res = await httpGet(`${url}/v1/data/${name}`, { 'x-api-key': key }).catch(() => undefined);
        if (res?.status === 200) {
          reads++;
          const at = Date.parse((JSON.parse(res.body.toString('utf8')) as { generated_at: string }).generated_at);
          if (at < (seen.get(name) ?? 0)) regressions.push(`${name}: ${new Date(at).toISOString()} after ${new Date(seen.get(name)!).toISOString()}`);
          seen.set(name, Math.max(at, seen.get(name) ?? 0));
        } else await sleep(20);
      }
    })();
    for (let i = 0; i < STREAMS; i++) {
      const s = await openSse(`${url}/v1/stream`, { 'x-api-key': key });
      expect(s.status).toBe(200);
      clients.push(s);
    }
    await waitFor(() => acked.length >= 10 && seen.size >= 10, 30_000, 'publications before the failover');
    await sleep(1000);

    const old = await group.primaryPort();
    const lastBefore = Math.max(...clients.flatMap((c) => c.events.filter((e) => e.event === 'change').map((e) => Number(e.id))));
    // Commits made while the replica stalls reach only the primary, which then dies: with the
    // wait on, none of them is acknowledged.
    const replica = group.ports.find((p) => p !== old)!;
    await group.stallReplica(old, replica);
    const ackedInStall = acked.length;
    await sleep(1500);
    group.kill(old);
    const killedAt = Date.now();
    const stalledAcks = acked.length - ackedInStall;
    group.resume(replica);
    const promoted = await waitFor(
      async () => {
        const p = await group!.primaryPort();
        return p !== old ? p : undefined;
      },
      30_000,
      'the promotion',
      100,
    );
    const promotedAt = Date.now();

    // A new drop after the promotion is served within 15 s of it.
    const late = docFor(LATE, Date.now());
    await dropFile(inbox, LATE.filename, late);
    await waitFor(
      async () => {
        const r = await httpGet(`${url}/v1/data/${LATE.filename}`, { 'x-api-key': key }).catch(() => undefined);
        return r?.status === 200 && r.body.equals(late);
      },
      15_000,
      'a drop published after the promotion',
    );
    const republishMs = Date.now() - promotedAt;
    // The killed server comes back as a replica of the new primary: publications are acknowledged again.
    await group.restartAsReplica(old, promoted);
    const ackedAtLate = acked.length;
    await waitFor(() => acked.length > ackedAtLate, 30_000, 'a PUT acknowledged once a replica is back');

    await sleep(2000);
    await drops.stop();
    putting = false;
    await puts;
    await waitServesNewest(url, key, book, 30_000);
    reading = false;
    await reader;

    // Acknowledged means kept: the new primary's catalog holds each acknowledged version, or a
    // newer one, and its history lists every acknowledged publication.
    const catalog = await readCatalogAt(`redis://127.0.0.1:${promoted}`, prefix);
    for (const a of acked) expect(catalog.get(a.filename)?.generatedAtMs ?? 0, a.filename).toBeGreaterThanOrEqual(a.generatedAtMs);
    const kept = new Set<string>();
    const primary = new Redis({ port: promoted, host: '127.0.0.1' });
    try {
      for (const f of PUT)
        for (const m of await primary.zrange(`${prefix}:history:${f.filename}`, 0, -1)) kept.add(`${f.filename}@${m.slice(m.lastIndexOf(':') + 1)}`);
    } finally {
      primary.disconnect();
    }
    expect(acked.filter((a) => !kept.has(`${a.filename}@${a.generatedAtMs}`)).length, 'acknowledged publications lost').toBe(0);
    expect(regressions, 'versions older than one served before').toEqual([]);
    // Every stream goes on past the failover, or was told to start again.
    for (const s of clients) {
      const reset = s.events.some((e) => e.event === 'reset');
      const after = s.events.some((e) => e.event === 'change' && Number(e.id) > lastBefore);
      expect(reset || after, 'a stream neither resumed nor was reset').toBe(true);
      expect(s.events.filter((e) => e.event !== 'change' && e.event !== 'reset')).toEqual([]);
    }
    // Nothing restarted; status names the primary in use.
    expect(svc.proc.exitCode).toBeNull();
    expect(svc.proc.pid).toBe(pid);
    const status = await runCli(env, ['status', '--json']);
    expect(JSON.parse(status.stdout)).toMatchObject({ redis: `127.0.0.1:${promoted}` });
    console.log(
      `failover: ${stalledAcks} PUTs acknowledged while the replica stalled; promoted ${promotedAt - killedAt} ms after the kill; a drop served ${republishMs} ms after the promotion; ${acked.length} PUTs acknowledged; ${reads} reads; ${clients.filter((c) => c.events.some((e) => e.event === 'reset')).length} of ${STREAMS} streams reset`,
    );
  }, 180_000);
});
