/**
 * History end to end, against `oddsfiles start`, real Redis and the fs store: every published
 * version listed newest first (paged, and as of a moment), its exact bytes immutable and
 * compressed on demand, the plan's window (403 beyond it, 403 without history), hostile
 * parameters refused, old objects deleted only once history lets go of them (never the current
 * one), and the index rebuilt from the store after Redis lost it.
 */
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drop } from '../../helpers/drops.js';
import { docFor, sleep } from '../../helpers/faults.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const LIVE = 'site_live_northwind_soccer.json';
const FEED = { filename: LIVE, kind: 'live', bookmaker: 'northwind', sport: 'soccer' };

interface Listed {
  etag: string;
  sha256: string;
  size: number;
  generated_at: string;
  published_at: string;
}

describe('history end to end', () => {
  const prefix = uniquePrefix('e2e-history');
  let dataDir: string;
  let env: Record<string, string>;
  let svc: RunningOddsfiles;
  let redis: Redis;
  const keys: Record<string, string> = {};
  /** What each publication was: its bytes and the ETag GET /v1/data answered with. */
  const published: { bytes: Buffer; etag: string; sha256: string }[] = [];
  // A whole second and 250 ms: docFor writes generated_at as toISOString does (…:02.250Z).
  let clock = Math.floor(Date.now() / 1000) * 1000 - 60_000 + 250;

  const get = (path: string, key: string | undefined, headers: Record<string, string> = {}) =>
    fetch(`${svc.url!}${path}`, { headers: { ...(key ? { 'x-api-key': key } : {}), ...headers } });
  const list = async (query = '', key = keys.pro!) => {
    const res = await get(`/v1/history/${LIVE}${query}`, key);
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as { versions: Listed[]; next: string | null; version?: Listed };
  };
  /** Publish the next version; `generatedAt` as the document writes it (default: toISOString of the clock). */
  const publish = async (generatedAt?: string) => {
    clock += 1000;
    const bytes = docFor(FEED, clock, 4000, { n: published.length, ...(generatedAt !== undefined ? { generated_at: generatedAt } : {}) });
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    await drop(join(dataDir, 'inbox'), LIVE, bytes);
    const etag = await waitFor(async () => {
      const r = await get(`/v1/data/${LIVE}`, keys.pro!, { 'accept-encoding': 'identity' });
      const body = Buffer.from(await r.arrayBuffer());
      return r.status === 200 && body.equals(bytes) ? r.headers.get('etag') : undefined;
    });
    published.push({ bytes, etag, sha256 });
  };
  const objectOf = (sha: string) => join(dataDir, 'store', 'objects', LIVE, `${sha}.json`);

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-history');
    await writeFile(
      join(dataDir, 'oddsfiles.yaml'),
      [
        'plans:',
        '  pro: { allow: ["*"], history: 24h }',
        '  brief: { allow: ["*"], history: 1s }',
        '  plain: { allow: ["*"] }',
        '  narrow: { allow: ["site_pregame_*"], history: 24h }',
        'ingest: { keep_versions: 1 }',
        'history: { retention: 7d, max_versions: 4 }',
        '',
      ].join('\n'),
    );
    env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    for (const name of ['pro', 'brief', 'plain', 'narrow']) {
      const res = await runCli(env, ['keys', 'create', '--name', name, '--plan', name]);
      expect(res.code, res.stderr).toBe(0);
      keys[name] = res.stdout.trim();
    }
    redis = new Redis(TEST_REDIS_URL);
    await waitFor(async () => (await get('/v1/files', keys.pro!)).status === 200);
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    redis?.disconnect();
    await dropPrefix(prefix);
  });

  it('lists every version newest first with the ETag GET /v1/data gave, pages with next, and answers as of a moment', async () => {
    for (let i = 0; i < 3; i++) await publish();
    const all = await list();
    expect(all.versions.map((v) => v.etag)).toEqual(published.map((p) => p.etag).reverse());
    expect(all.versions.map((v) => v.sha256)).toEqual(published.map((p) => p.sha256).reverse());
    expect(all.versions[0]!.size).toBe(published[2]!.bytes.length);
    expect(all.versions[2]!.generated_at).toBe(new Date(clock - 2000).toISOString());
    expect(all.next).toBeNull();

    const one = await list('?limit=1');
    expect(one.versions.map((v) => v.etag)).toEqual([published[2]!.etag]);
    expect(one.next).toEqual(expect.any(String));
    const two = await list(`?limit=1&before=${encodeURIComponent(one.next!)}`);
    expect(two.versions.map((v) => v.etag)).toEqual([published[1]!.etag]);
    const rest = await list(`?before=${encodeURIComponent(two.next!)}`);
    expect(rest.versions.map((v) => v.etag)).toEqual([published[0]!.etag]);
    expect(rest.next).toBeNull();

    // As of a moment: the version published at or before it and not yet replaced.
    const [, mid, last] = all.versions.slice().reverse();
    const between = new Date((Date.parse(mid!.published_at) + Date.parse(last!.published_at)) / 2).toISOString();
    if (between !== last!.published_at) expect((await list(`?at=${between}`)).version!.etag).toBe(mid!.etag);
    expect((await list(`?at=${new Date().toISOString()}`)).version!.etag).toBe(published[2]!.etag);
    expect((await list(`?before=${encodeURIComponent(last!.published_at)}`)).versions[0]!.etag).toBe(mid!.etag);
    const before = await get(`/v1/history/${LIVE}?at=${new Date(Date.now() - 3_600_000).toISOString()}`, keys.pro!);
    expect(before.status).toBe(404);
  });

  it("serves a version's exact bytes, immutable, gzip on demand; 304 for the same ETag", async () => {
    const first = published[0]!;
    const res = await get(`/v1/history/${LIVE}/${first.etag.slice(1, -1)}`, keys.pro!, { 'accept-encoding': 'identity' });
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(first.bytes)).toBe(true);
    expect(res.headers.get('etag')).toBe(first.etag);
    expect(res.headers.get('cache-control')).toBe('private, max-age=31536000, immutable');
    // Quoted works too; gzip when asked.
    const gz = await get(`/v1/history/${LIVE}/${encodeURIComponent(first.etag)}`, keys.pro!, { 'accept-encoding': 'gzip' });
    expect(gz.status).toBe(200);
    expect(gz.headers.get('content-encoding')).toBe('gzip');
    // fetch decodes the body: what it gives is the bytes again.
    expect(Buffer.from(await gz.arrayBuffer()).equals(first.bytes)).toBe(true);
    const again = await get(`/v1/history/${LIVE}/${first.etag.slice(1, -1)}`, keys.pro!, { 'accept-encoding': 'identity', 'if-none-match': first.etag });
    expect(again.status).toBe(304);
  });

  it('refuses keys without history, versions and moments beyond the window, and hostile parameters', async () => {
    const plain = await get(`/v1/history/${LIVE}`, keys.plain!);
    expect(plain.status).toBe(403);
    const body = (await plain.json()) as { type: string; detail: string };
    expect(body.type).toMatch(/history-forbidden$/);
    expect(body.detail).toMatch(/plan does not include history/);
    expect((await get(`/v1/history/${LIVE}`, undefined)).status).toBe(401);

    // The brief plan reaches 1 s back: the first version was replaced longer ago than that.
    await sleep(1200);
    const old = await get(`/v1/history/${LIVE}/${published[0]!.etag.slice(1, -1)}`, keys.brief!);
    expect(old.status).toBe(403);
    expect(((await old.json()) as { type: string }).type).toMatch(/history-forbidden$/);
    // The current one is within any window.
    expect((await get(`/v1/history/${LIVE}/${published[2]!.etag.slice(1, -1)}`, keys.brief!)).status).toBe(200);
    const briefList = (await (await get(`/v1/history/${LIVE}`, keys.brief!)).json()) as { versions: Listed[] };
    expect(briefList.versions.map((v) => v.etag)).toEqual([published[2]!.etag]);
    const atOld = await get(`/v1/history/${LIVE}?at=${new Date(Date.now() - 60_000).toISOString()}`, keys.brief!);
    expect(atOld.status).toBe(403);
    const beforeOld = await get(`/v1/history/${LIVE}?before=${new Date(Date.now() - 60_000).toISOString()}`, keys.brief!);
    expect(beforeOld.status).toBe(403);

    for (const q of [
      '?limit=0',
      '?limit=1001',
      '?limit=abc',
      '?limit=1e2',
      '?at=yesterday',
      '?at=2026-13-45T99:00:00Z',
      '?at=2026-11-31T00:00:00Z', // no such day: not rolled over into December
      '?at=2026-02-29T12:00:00Z',
      '?before=2026-04-31T00:00:00Z',
      '?at=2026-01-01T24:00:00Z',
      '?before=%00',
      '?before=1:2:3',
      '?at=2026-01-01T00:00:00Z&limit=3',
    ]) {
      const r = await get(`/v1/history/${LIVE}${q}`, keys.pro!);
      expect(r.status, q).toBe(400);
    }
    expect((await get(`/v1/history/${LIVE}/zzz`, keys.pro!)).status).toBe(400);
    // A zone's + sent raw arrives as a space: the 400 says to send it as %2B; sent so, it works.
    for (const param of ['at', 'before']) {
      const raw = await get(`/v1/history/${LIVE}?${param}=2026-01-01T12:00:00+01:00`, keys.pro!);
      expect(raw.status, param).toBe(400);
      const { detail } = (await raw.json()) as { detail: string };
      expect(detail).toContain('+ must be sent as %2B');
      expect(detail).toContain(`${param}=2026-01-01T12:00:00%2B01:00`);
      const plain = (await (await get(`/v1/history/${LIVE}?${param}=yesterday`, keys.pro!)).json()) as { detail: string };
      expect(plain.detail).not.toContain('%2B');
    }
    expect((await get(`/v1/history/${LIVE}?at=${encodeURIComponent(new Date().toISOString().replace('Z', '+00:00'))}`, keys.pro!)).status).toBe(200);
    expect((await get(`/v1/history/${LIVE}/${'0'.repeat(32)}`, keys.pro!)).status).toBe(404);
    expect((await get(`/v1/history/..%2Fetc`, keys.pro!)).status).toBe(404);
  });

  it('refuses a name exactly as GET /v1/data does for the same name and key (404 never published, 403 not allowed)', async () => {
    const NEVER = 'site_live_bluewater_tennis.json';
    const problem = async (path: string, key: string) => {
      const r = await get(path, key);
      const body = (await r.json()) as { type: string; title: string; detail: string };
      return { status: r.status, type: body.type, detail: body.detail };
    };
    const cases: [string, string, number][] = [
      [NEVER, keys.pro!, 404],
      [NEVER, keys.plain!, 404],
      [NEVER, keys.narrow!, 404],
      [LIVE, keys.narrow!, 403],
      ['not a feed name.json', keys.pro!, 404],
    ];
    for (const [name, key, status] of cases) {
      const data = await problem(`/v1/data/${encodeURIComponent(name)}`, key);
      expect(data.status, name).toBe(status);
      for (const path of [
        `/v1/history/${encodeURIComponent(name)}`,
        `/v1/history/${encodeURIComponent(name)}?at=2026-01-01T00:00:00Z`,
        `/v1/history/${encodeURIComponent(name)}/${'0'.repeat(32)}`,
        `/v1/history/${encodeURIComponent(name)}/zzz`,
      ]) {
        expect(await problem(path, key), path).toEqual(data);
      }
    }
  });

  it('deletes an old object only once history lets go of it, never the current one', async () => {
    // keep_versions 1 alone would delete every replaced object; history keeps the last 4.
    for (const p of published) expect(existsSync(objectOf(p.sha256))).toBe(true);
    for (let i = 0; i < 3; i++) await publish();
    const kept = published.slice(-4);
    await waitFor(() => !existsSync(objectOf(published[0]!.sha256)) && !existsSync(objectOf(published[1]!.sha256)), 20_000, 'old objects deleted');
    for (const p of kept) expect(existsSync(objectOf(p.sha256)), p.etag).toBe(true);
    expect((await list()).versions.map((v) => v.etag)).toEqual(kept.map((p) => p.etag).reverse());
    expect((await get(`/v1/history/${LIVE}/${published[0]!.etag.slice(1, -1)}`, keys.pro!)).status).toBe(404);
  });

  it('rebuilds the index from the store after Redis lost it', async () => {
    const before = await list();
    await waitFor(async () => (await redis.hget(`${prefix}:historyrefs:${LIVE}`, 'built')) === '1', 20_000, 'index built once');
    // Checking the index of a healthy file against the store found nothing missing: no line says otherwise.
    expect(svc.logs.filter((l) => /history index/.test(String(l.msg)))).toEqual([]);
    await svc.stop();
    await redis.del(`${prefix}:history:${LIVE}`, `${prefix}:historyrefs:${LIVE}`);
    svc = await startOddsfiles(env);
    await waitFor(async () => (await get(`/v1/history/${LIVE}`, keys.pro!)).status === 200);
    const after = await waitFor(
      async () => {
        const l = await list();
        return l.versions.length === before.versions.length ? l : undefined;
      },
      20_000,
      'history rebuilt',
    );
    expect(after.versions).toEqual(before.versions);
    // What was missing is said once, as a warning naming the file and how many versions.
    const line = await svc.waitForLog((l) => l.filename === LIVE && /^history index of .* lacked/.test(String(l.msg)));
    expect(line).toMatchObject({ level: 40, restored: before.versions.length, versions: before.versions.length });
    expect(svc.logs.filter((l) => /history index/.test(String(l.msg)))).toHaveLength(1);
  }, 60_000);

  it("writes a version's generated_at as GET /v1/catalog and /v1/data do: to the second as publishers write it, milliseconds when it has some", async () => {
    // A publisher's whole second (the form the API's own examples use), then a time with milliseconds.
    for (const generatedAt of [new Date(Math.floor(clock / 1000) * 1000 + 1000).toISOString().replace('.000Z', 'Z'), undefined]) {
      await publish(generatedAt);
      const current = published.at(-1)!;
      const catalog = (await (await get('/v1/catalog', keys.pro!)).json()) as { files: { filename: string; etag: string; generated_at: string }[] };
      const entry = catalog.files.find((f) => f.filename === LIVE)!;
      expect(entry.etag).toBe(current.etag);
      expect(entry.generated_at).toBe(generatedAt ?? new Date(clock).toISOString());
      const newest = (await list('?limit=1')).versions[0]!;
      expect(newest.etag).toBe(current.etag);
      expect(newest.generated_at).toBe(entry.generated_at);
      expect((await list(`?at=${encodeURIComponent(newest.published_at)}`)).version!.generated_at).toBe(entry.generated_at);
      // The version's bytes say it in Generated-At as GET /v1/data does.
      const data = await get(`/v1/data/${LIVE}`, keys.pro!, { 'accept-encoding': 'identity' });
      const old = await get(`/v1/history/${LIVE}/${current.etag.slice(1, -1)}`, keys.pro!, { 'accept-encoding': 'identity' });
      expect(old.status).toBe(200);
      expect(data.headers.get('generated-at')).toBe(entry.generated_at);
      expect(old.headers.get('generated-at')).toBe(entry.generated_at);
    }
  });
});
