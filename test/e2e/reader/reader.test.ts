/**
 * The reader end to end: `oddsfiles start`, keys made with the CLI (by plan and by allow-list),
 * the corpus dropped, each key's list and downloads checked byte for byte over HTTP; a revoked
 * key gets 401; a second, reader-only process serves the same.
 */
import { gunzipSync, brotliDecompressSync } from 'node:zlib';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateCorpus } from '../../fixtures/corpus.js';
import { drop, pendingDrops } from '../../helpers/drops.js';
import { docFor } from '../../helpers/faults.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const valid = generateCorpus().filter((c) => c.group === 'valid');
const names = valid.map((c) => c.filename).sort();
const globToRegex = (p: string) =>
  new RegExp(
    `^${p
      .split('*')
      .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  );
const allowedBy = (patterns: string[]) => names.filter((n) => patterns.some((p) => globToRegex(p).test(n)));

describe('reader end to end', () => {
  const prefix = uniquePrefix('e2e-reader');
  let env: Record<string, string>;
  let svc: RunningOddsfiles;
  let second: RunningOddsfiles;
  const keys: Record<string, { key: string; patterns: string[] }> = {};

  const get = (base: string, path: string, key?: string, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, { headers: { ...(key ? { 'x-api-key': key } : {}), ...headers } });

  beforeAll(async () => {
    const dataDir = await makeDataDir('e2e-reader');
    // The default plans' rates (free: 30 a minute) would cut the downloads below short: same
    // allow-lists, rates out of the way (rate limits have their own tests: ratelimit.test.ts here, test/reader/lease*.test.ts).
    // Versions are carried to the reader-only process, as on S3 (the last test).
    await writeFile(
      join(dataDir, 'oddsfiles.yaml'),
      'plans:\n  free: { allow: ["site_pregame_*"], rate: { max: 100000, per: 1m } }\n  pro: { allow: ["*"], rate: { max: 100000, per: 1m } }\n' +
        'ingest:\n  carry_max_bytes: 262144\n',
    );
    env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    const make = async (label: string, args: string[], patterns: string[]) => {
      const res = await runCli(env, ['keys', 'create', '--name', label, ...args]);
      expect(res.code, res.stderr).toBe(0);
      const key = res.stdout.trim();
      expect(key.split('\n')).toHaveLength(1);
      keys[label] = { key, patterns };
    };
    await make('by-plan-pro', ['--plan', 'pro'], ['*']);
    await make('by-plan-free', ['--plan', 'free'], ['site_pregame_*']);
    await make('live-only', ['--allow', 'site_live_*'], ['site_live_*']);
    await make('one-file', ['--allow', 'site_livepre_oddsport.json'], ['site_livepre_oddsport.json']);
    await make('two-patterns', ['--allow', 'site_*_hillview_*', '--allow', 'site_live_silverline.json'], ['site_*_hillview_*', 'site_live_silverline.json']);
    await Promise.all(valid.map((c) => drop(join(dataDir, 'inbox'), c.filename, c.bytes)));
    await waitFor(async () => (await pendingDrops(join(dataDir, 'inbox'))).length === 0, 30_000, 'an empty inbox');
    await waitFor(
      async () => {
        const r = await get(svc.url!, '/v1/files', keys['by-plan-pro']!.key);
        return r.status === 200 && ((await r.json()) as { files: string[] }).files.length === 38;
      },
      20_000,
      'the reader to list 38 files',
    );
    second = await startOddsfiles(env, ['start', '--roles', 'reader']);
  }, 90_000);

  afterAll(async () => {
    await second?.stop();
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it('lists, for each key, exactly the published names its allow-list matches, sorted', async () => {
    for (const [label, { key, patterns }] of Object.entries(keys)) {
      const res = await get(svc.url!, '/v1/files', key);
      expect(res.status, label).toBe(200);
      expect(((await res.json()) as { files: string[] }).files, label).toEqual(allowedBy(patterns));
    }
  });

  it('downloads every allowed file byte for byte, and answers 403 for the others', async () => {
    for (const [label, { key, patterns }] of Object.entries(keys)) {
      const allowed = new Set(allowedBy(patterns));
      for (const c of valid) {
        const res = await get(svc.url!, `/v1/data/${c.filename}`, key);
        if (allowed.has(c.filename)) {
          expect(res.status, `${label} ${c.filename}`).toBe(200);
          expect(res.headers.get('content-type')).toMatch(/^application\/json/);
          expect(Buffer.from(await res.arrayBuffer()).equals(c.bytes), `${label} ${c.filename}`).toBe(true);
        } else {
          expect(res.status, `${label} ${c.filename}`).toBe(403);
          expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
          await res.arrayBuffer();
        }
      }
    }
  });

  it('serves gzip and br that decode to the same bytes, and 304 on If-None-Match', async () => {
    const c = valid.find((v) => v.filename === 'site_pregame_redstone_soccer.json')!;
    const key = keys['by-plan-pro']!.key;
    const raw = async (encoding: string) => {
      // fetch decodes by itself; node:http shows the bytes on the wire.
      const { request } = await import('node:http');
      return new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
        const req = request(`${svc.url}/v1/data/${c.filename}`, { headers: { 'x-api-key': key, 'accept-encoding': encoding } }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (d: Buffer) => chunks.push(d));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        });
        req.on('error', reject);
        req.end();
      });
    };
    // Variants are made once per version, off the request path: ask until they are there.
    const gz = await waitFor(
      async () => {
        const r = await raw('gzip');
        return r.headers['content-encoding'] === 'gzip' ? r : undefined;
      },
      10_000,
      'the gzip variant',
    );
    expect(gunzipSync(gz.body).equals(c.bytes)).toBe(true);
    const br = await waitFor(
      async () => {
        const r = await raw('br');
        return r.headers['content-encoding'] === 'br' ? r : undefined;
      },
      10_000,
      'the br variant',
    );
    expect(brotliDecompressSync(br.body).equals(c.bytes)).toBe(true);
    expect(gz.headers.etag).not.toBe(br.headers.etag);
    const plain = await get(svc.url!, `/v1/data/${c.filename}`, key);
    const etag = plain.headers.get('etag')!;
    await plain.arrayBuffer();
    expect(etag).toMatch(/^"/);
    const again = await get(svc.url!, `/v1/data/${c.filename}`, key, { 'if-none-match': etag });
    expect(again.status).toBe(304);
  });

  it('answers 401 without a key, with an unknown key, and for a revoked key as soon as it is announced', async () => {
    expect((await get(svc.url!, '/v1/files')).status).toBe(401);
    expect((await get(svc.url!, '/v1/files', 'odf_not-a-real-key')).status).toBe(401);
    const { key } = keys['one-file']!;
    expect((await get(second.url!, '/v1/files', key)).status).toBe(200);
    const res = await runCli(env, ['keys', 'revoke', 'one-file']);
    expect(res.code, res.stderr).toBe(0);
    const revokedAt = Date.now();
    for (const base of [svc.url!, second.url!]) {
      await waitFor(async () => (await get(base, '/v1/files', key)).status === 401, 10_000, 'the revocation to reach every reader', 20);
    }
    // Announced, not found by the full re-read every 30 s (reader.refresh), however loaded the machine.
    expect(Date.now() - revokedAt).toBeLessThan(10_000);
    const list = await runCli(env, ['keys', 'list', '--json']);
    const listed = JSON.parse(list.stdout) as { name: string; revoked_at?: string | null }[];
    expect(listed.find((k) => k.name === 'one-file')?.revoked_at).toBeTruthy();
    expect(list.stdout).not.toContain(key);
  });

  it('a second, reader-only process serves the same list and bytes', async () => {
    const key = keys['by-plan-pro']!.key;
    const a = (await (await get(svc.url!, '/v1/files', key)).json()) as { files: string[] };
    const b = (await (await get(second.url!, '/v1/files', key)).json()) as { files: string[] };
    expect(b).toEqual(a);
    for (const c of valid.slice(0, 10)) {
      const res = await get(second.url!, `/v1/data/${c.filename}`, key);
      expect(Buffer.from(await res.arrayBuffer()).equals(c.bytes)).toBe(true);
    }
  });

  it('the reader-only process reports the queue as the worker process does, and opens the dashboard on demand', async () => {
    // Queue depth and workers in a process that never loaded BullMQ (plain Redis reads).
    const sample = (text: string, name: string, state?: string) => {
      const re = new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'gm');
      for (const m of text.matchAll(re)) if (state === undefined || m[1]!.includes(`state="${state}"`)) return Number(m[2]);
      return undefined;
    };
    const metrics = await (await get(second.url!, '/metrics')).text();
    expect(metrics).toMatch(/role="reader"/);
    expect(sample(metrics, 'oddsfiles_queue_workers')).toBeGreaterThanOrEqual(1);
    expect(sample(metrics, 'oddsfiles_queue_jobs', 'completed')).toBeGreaterThanOrEqual(38);
    expect(sample(metrics, 'oddsfiles_queue_jobs', 'waiting')).toBe(0);
    // The dashboard's API from the reader-only process (BullMQ loaded now) and from the first one agree.
    type Queues = { queues: { name: string; counts: Record<string, number> }[] };
    const counts = async (base: string) => {
      const res = await get(base, '/admin/queues/api/queues');
      expect(res.status).toBe(200);
      return ((await res.json()) as Queues).queues.find((q) => q.name === 'ingest')!.counts;
    };
    const [a, b] = [await counts(second.url!), await counts(svc.url!)];
    expect(a).toEqual(b);
    expect(a.completed).toBe(sample(metrics, 'oddsfiles_queue_jobs', 'completed'));
  });

  it('404 for unpublished and invalid names; /metrics on loopback counts the drops', async () => {
    const key = keys['by-plan-pro']!.key;
    for (const path of ['/v1/data/site_live_nobody_soccer.json', '/v1/data/..%2F..%2Fetc%2Fpasswd', '/v1/data/odds.json']) {
      const res = await get(svc.url!, path, key);
      expect(res.status, path).toBe(404);
      await res.arrayBuffer();
    }
    const metrics = await (await get(svc.url!, '/metrics')).text();
    expect(metrics).toMatch(/oddsfiles_drops_total\{[^}]*outcome="published"[^}]*\} 38/);
    expect(metrics).toContain('oddsfiles_feed_age_seconds{');
    // No key in the logs, ever.
    const logs = JSON.stringify([...svc.logs, ...second.logs]);
    for (const { key: k } of Object.values(keys)) expect(logs).not.toContain(k);
  });

  // Last: it publishes new versions (the counts above are of the corpus only).
  it("a new version reaches the reader-only process with its announcement: the worker's log line says one reader got its bytes", async () => {
    const key = keys['by-plan-pro']!.key;
    const feed = { filename: 'site_live_northwind_soccer.json', bookmaker: 'northwind', sport: 'soccer' };
    // The worker carried the corpus's versions to nobody (the second reader was not up yet) and
    // then paused carrying for 10 s: drop new versions until one is carried.
    let at = Date.now();
    const carried = await waitFor(
      async () => {
        const bytes = docFor(feed, (at += 1000), 4000);
        await drop(join(env.DATA_DIR!, 'inbox'), feed.filename, bytes);
        const line = await waitFor(
          () => svc.logs.find((l) => l.filename === feed.filename && l.generatedAt === new Date(at).toISOString()),
          10_000,
          'the drop settled',
        );
        return line.carriedTo === 1 ? bytes : undefined;
      },
      25_000,
      'a version carried to the reader-only process',
      500,
    );
    const res = await waitFor(
      async () => {
        const r = await get(second.url!, `/v1/data/${feed.filename}`, key);
        const body = Buffer.from(await r.arrayBuffer());
        return body.equals(carried) ? r : undefined;
      },
      5000,
      'the reader-only process to serve the carried version',
    );
    expect(res.status).toBe(200);
    // The process with the worker hands its own reader the bytes: it takes nothing carried.
    expect(svc.logs.some((l) => typeof l.carriedTo === 'number' && (l.carriedTo as number) > 1)).toBe(false);
  }, 40_000);
});
