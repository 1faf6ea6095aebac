/**
 * Publishing over HTTPS end to end: `oddsfiles start` as a child process, publisher keys made with
 * the CLI, then PUT /v1/data/{filename} over HTTP: 201 and the GET that serves it with the same
 * ETag, 200 for the same bytes (also a document stamped with its time of receipt), 409 naming the
 * version that won, 422 with the reason of its reason.json, 413 up front and while streaming
 * (plain and gzip), 400/401/403/429, a dry run that publishes nothing, an upload abandoned
 * mid-body that leaves nothing staged, a staged upload no job names swept by age, 504 while no
 * worker runs (then settled by one), and `oddsfiles publish --url`.
 */
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drop, rejectionRecords, tinyDoc } from '../../helpers/drops.js';
import { catalogSeq, readCatalog, sha256 } from '../../helpers/published.js';
import { Redis } from 'ioredis';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const MAX = 64 * 1024;
const LIVE = 'site_live_northwind_soccer.json';
const PREGAME = 'site_pregame_northwind_soccer.json';
const BLUE = 'site_live_bluewater_soccer.json';

const CONFIG = `limits: { max_file_bytes: ${MAX} }
plans:
  pro: { allow: ["*"] }
  tiny: { allow: [], publish_rate: { max: 2, per: 1m } }
publish: { rate: { max: 100000, per: 1m }, staged_max_age: 2s }
# A drop that does not parse waits this long for its writer; an upload is whole, and never waits.
ingest: { settle: 50s }
`;

interface Put {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

describe('PUT /v1/data/{filename} end to end', () => {
  const prefix = uniquePrefix('e2e-put');
  let dataDir: string;
  let env: Record<string, string>;
  let svc: RunningOddsfiles;
  const keys = { northwind: '', consumer: '', both: '', tiny: '' };
  const storeDir = () => join(dataDir, 'store');
  const incoming = async () => (await readdir(join(storeDir(), 'incoming')).catch(() => [] as string[])).filter((n) => !n.startsWith('.'));

  const put = async (name: string, body: Buffer | string, key: string | undefined, headers: Record<string, string> = {}, query = ''): Promise<Put> => {
    const res = await fetch(`${svc.url}/v1/data/${name}${query}`, {
      method: 'PUT',
      headers: { ...(key ? { 'x-api-key': key } : {}), 'content-type': 'application/json', ...headers },
      body,
    });
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
  };
  const get = (name: string, key: string) => fetch(`${svc.url}/v1/data/${name}`, { headers: { 'x-api-key': key } });

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-put');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), CONFIG);
    env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    const make = async (args: string[]) => {
      const res = await runCli(env, ['keys', 'create', ...args]);
      expect(res.code, res.stderr).toBe(0);
      return res.stdout.trim();
    };
    keys.northwind = await make(['--name', 'northwind-feed', '--publish', 'site_*_northwind*']);
    keys.consumer = await make(['--name', 'reader', '--plan', 'pro']);
    keys.both = await make(['--name', 'both', '--plan', 'pro', '--publish', 'site_*_bluewater*']);
    keys.tiny = await make(['--name', 'tiny', '--plan', 'tiny', '--publish', '*']);
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it("reads the queue's events only while an upload waits for its outcome, not for every drop", async () => {
    // BullMQ's QueueEvents connections (named <prefix>:<queue>:qe), blocked reading the queue's events.
    const readingEvents = async () => {
      const redis = new Redis(TEST_REDIS_URL);
      try {
        const list = (await redis.client('LIST')) as string;
        return list.split('\n').filter((l) => new RegExp(` name=${prefix}:[^ ]*:qe .* cmd=xread `).test(l)).length;
      } finally {
        redis.disconnect();
      }
    };
    const dropped = 'site_pregame_bluewater_tennis.json';
    await drop(join(dataDir, 'inbox'), dropped, tinyDoc('bluewater', 'tennis', new Date(Date.now() - 120_000).toISOString()));
    await waitFor(async () => (await get(dropped, keys.consumer)).status === 200, 15_000, 'the dropped file served');
    expect(await readingEvents()).toBe(0);
    const r = await put('site_pregame_bluewater_basketball.json', tinyDoc('bluewater', 'basketball', new Date(Date.now() - 60_000).toISOString()), keys.both);
    expect(r.status).toBe(201);
    await waitFor(async () => (await readingEvents()) === 0, 30_000, 'the events reading closed once no upload waits');
  });

  it('keys list shows the publish patterns (and --json their rate)', async () => {
    const table = await runCli(env, ['keys', 'list']);
    expect(table.stdout).toMatch(/northwind-feed\s+-\s+-\s+site_\*_northwind\*/);
    const json = JSON.parse((await runCli(env, ['keys', 'list', '--json'])).stdout) as { name: string; publish: string[]; publish_rate: unknown }[];
    expect(json.find((k) => k.name === 'northwind-feed')).toMatchObject({ publish: ['site_*_northwind*'], publish_rate: { max: 100000, per_seconds: 60 } });
    expect(json.find((k) => k.name === 'tiny')).toMatchObject({ publish: ['*'], publish_rate: { max: 2, per_seconds: 60 } });
    expect(json.find((k) => k.name === 'reader')).toMatchObject({ publish: [], publish_rate: null });
  });

  it('201 published: GET then serves those bytes with the ETag of the answer; the same bytes again: 200 unchanged, no new version', async () => {
    const doc = tinyDoc('northwind', 'soccer', new Date(Date.now() - 60_000).toISOString(), { n: 1 });
    const first = await put(LIVE, doc, keys.northwind);
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    const etag = `"${sha256(doc).slice(0, 32)}"`;
    expect(first.body).toEqual({ outcome: 'published', filename: LIVE, etag, generated_at: JSON.parse(doc.toString()).generated_at });
    expect(first.headers.get('etag')).toBe(etag);
    const res = await get(LIVE, keys.consumer);
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe(etag);
    expect(Buffer.from(await res.arrayBuffer()).equals(doc)).toBe(true);

    const seq = await catalogSeq(prefix);
    const again = await put(LIVE, doc, keys.northwind);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ outcome: 'unchanged', etag });
    expect(await catalogSeq(prefix)).toBe(seq);
    expect(await incoming()).toEqual([]);
  });

  it('a document without generated_at is stamped once: the same bytes again are unchanged (over HTTP and through the folder alike)', async () => {
    const doc = Buffer.from(JSON.stringify({ bookmaker: 'northwind', sport: 'soccer', events: [{ id: 'stamp-me' }] }));
    const first = await put(PREGAME, doc, keys.northwind);
    expect(first.status).toBe(201);
    const stamped = first.body.generated_at as string;
    const seq = await catalogSeq(prefix);
    await new Promise((r) => setTimeout(r, 20));
    const again = await put(PREGAME, doc, keys.northwind);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ outcome: 'unchanged', generated_at: stamped, etag: first.body.etag });
    // The same rule for a drop: the same bytes in the folder are unchanged too.
    await drop(join(dataDir, 'inbox'), PREGAME, doc);
    await svc.waitForLog((l) => l.msg === 'drop unchanged' && l.filename === PREGAME);
    expect(await catalogSeq(prefix)).toBe(seq);
  });

  it('409 superseded names the generated_at that won; nothing changes', async () => {
    const now = Date.now();
    const newer = tinyDoc('northwind', 'soccer', new Date(now - 1000).toISOString(), { n: 'newer' });
    expect((await put(LIVE, newer, keys.northwind)).status).toBe(201);
    const older = tinyDoc('northwind', 'soccer', new Date(now - 30_000).toISOString(), { n: 'older' });
    const res = await put(LIVE, older, keys.northwind);
    expect(res.status).toBe(409);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({
      type: 'https://oddsfiles.dev/problems/superseded',
      status: 409,
      outcome: 'superseded',
      published_generated_at: new Date(now - 1000).toISOString(),
      published_etag: `"${sha256(newer).slice(0, 32)}"`,
    });
    expect(Buffer.from(await (await get(LIVE, keys.consumer)).arrayBuffer()).equals(newer)).toBe(true);
  });

  it('422 rejected with the reason and detail of its reason.json in REJECTED_DIR, at once (an upload is not waited on as a file being written); nothing staged is left', async () => {
    // (Waiting as for a drop, ingest.settle of 50 s, would answer 504 after publish.settle_timeout.)
    const res = await put(BLUE, '{"bookmaker": "bluewater", "events": [', keys.both);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ type: 'https://oddsfiles.dev/problems/rejected', outcome: 'rejected', reason: 'invalid_json', filename: BLUE });
    const records = await rejectionRecords(join(dataDir, 'rejected'));
    const record = records.find((r) => r.id === res.body.rejection_id);
    expect(record).toMatchObject({ filename: BLUE, reason: 'invalid_json', detail: res.body.detail });
    // Kept once, in REJECTED_DIR: an upload is not parked in the inbox to be watched for late writes.
    expect(await readdir(join(dataDir, 'inbox', '.rejected-watch')).catch(() => [])).not.toContain(res.body.rejection_id);
    const mismatch = await put(BLUE, tinyDoc('northwind', 'soccer', new Date().toISOString()), keys.both);
    expect(mismatch.body).toMatchObject({ reason: 'bookmaker_mismatch' });
    // No body and no Content-Type at all: the empty document, as with one.
    for (const query of ['', '?dry_run=1']) {
      const empty = await fetch(`${svc.url}/v1/data/${BLUE}${query}`, { method: 'PUT', headers: { 'x-api-key': keys.both } });
      expect(empty.status, query).toBe(422);
      expect(await empty.json()).toMatchObject({ reason: 'empty' });
    }
    expect(await incoming()).toEqual([]);
  });

  it('413 over limits.max_file_bytes by Content-Length, before any byte is read', async () => {
    const res = await put(LIVE, Buffer.alloc(MAX + 1, 0x20), keys.northwind);
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ type: 'https://oddsfiles.dev/problems/payload-too-large' });
  });

  it('413 for a chunked body that grows past the limit, answered while it is still being sent; nothing staged', async () => {
    const port = Number(new URL(svc.url!).port);
    const answer = await new Promise<{ status: number; sent: number }>((resolve, reject) => {
      let sent = 0;
      const req = httpRequest(
        { host: '127.0.0.1', port, method: 'PUT', path: `/v1/data/${LIVE}`, headers: { 'x-api-key': keys.northwind, 'transfer-encoding': 'chunked' } },
        (res) => {
          res.resume();
          resolve({ status: res.statusCode ?? 0, sent });
          req.destroy();
        },
      );
      // A connection reset before the answer was read fails the test (status 0) rather than hanging it.
      req.on('error', () => resolve({ status: 0, sent }));
      // Paced (8 KiB every 2 ms), so that a busy machine's slow server is not outrun by the kernel's
      // buffers: the body never ends, and the answer must come long before 100 times the limit.
      const chunk = Buffer.alloc(8 * 1024, 0x20);
      const pump = () => {
        if (req.destroyed || sent > 100 * MAX) return req.destroyed ? undefined : reject(new Error('no answer after 100 times the limit'));
        sent += chunk.length;
        if (req.write(chunk)) setTimeout(pump, 2);
        else req.once('drain', pump);
      };
      pump();
    });
    expect(answer.status).toBe(413);
    expect(answer.sent).toBeLessThan(100 * MAX);
    expect(await incoming()).toEqual([]);
  });

  it('takes a gzip body; a gzip body that decompresses past the limit is 413', async () => {
    const doc = tinyDoc('northwind', null, new Date().toISOString(), { pad: 'x'.repeat(10_000) });
    const name = 'site_livepre_northwind.json';
    const ok = await put(name, gzipSync(doc), keys.northwind, { 'content-encoding': 'gzip' });
    // northwind's feeds are split: site_livepre_northwind.json is not one of its filenames.
    expect(ok.status).toBe(400);
    const live = tinyDoc('northwind', 'soccer', new Date().toISOString(), { pad: 'x'.repeat(10_000) });
    const res = await put(LIVE, gzipSync(live), keys.northwind, { 'content-encoding': 'gzip' });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(Buffer.from(await (await get(LIVE, keys.consumer)).arrayBuffer()).equals(live)).toBe(true);
    const bomb = gzipSync(Buffer.alloc(MAX * 4, 0x20));
    expect(bomb.length).toBeLessThan(MAX);
    const big = await put(LIVE, bomb, keys.northwind, { 'content-encoding': 'gzip' });
    expect(big.status).toBe(413);
    expect((await put(LIVE, live, keys.northwind, { 'content-encoding': 'br' })).status).toBe(415);
  });

  it('401 without a valid key, 403 for a key that may not publish or not this name, 400 for a name that is no feed', async () => {
    const doc = tinyDoc('northwind', 'soccer', new Date().toISOString());
    expect((await put(LIVE, doc, undefined)).status).toBe(401);
    expect((await put(LIVE, doc, 'odf_notakeyatallnotakeyatallnotakeyatallnota')).status).toBe(401);
    const consumer = await put(LIVE, doc, keys.consumer);
    expect(consumer.status).toBe(403);
    expect(consumer.body.detail).toMatch(/may not publish/);
    const other = await put(BLUE, tinyDoc('bluewater', 'soccer', new Date().toISOString()), keys.northwind);
    expect(other.status).toBe(403);
    expect((await put('not-a-feed.json', doc, keys.northwind)).status).toBe(400);
    expect((await put('..%2Fetc%2Fpasswd', doc, keys.northwind)).status).toBe(400);
    const post = await fetch(`${svc.url}/v1/data/${LIVE}`, { method: 'POST', headers: { 'x-api-key': keys.northwind }, body: doc });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD, PUT');
  });

  it("429 over the key's publish rate (its plan's publish_rate), with RateLimit headers", async () => {
    const name = 'site_live_redstone_tennis.json';
    const doc = (i: number) => tinyDoc('redstone', 'tennis', new Date(Date.now() - 10_000 + i).toISOString());
    expect((await put(name, doc(1), keys.tiny)).status).toBe(201);
    const second = await put(name, doc(2), keys.tiny);
    expect(second.status).toBe(201);
    expect(second.headers.get('ratelimit-remaining')).toBe('0');
    const third = await put(name, doc(3), keys.tiny);
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toMatch(/^\d+$/);
    // Reads are counted apart from PUTs: the consumer side of a key is not affected.
  });

  it('?dry_run=1 validates and answers without publishing anything', async () => {
    const name = 'site_pregame_northwind_tennis.json';
    const doc = tinyDoc('northwind', 'tennis', new Date().toISOString());
    const seq = await catalogSeq(prefix);
    const ok = await put(name, doc, keys.northwind, {}, '?dry_run=1');
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ outcome: 'valid', dry_run: true, would: 'published', filename: name });
    const bad = await put(name, '[]', keys.northwind, {}, '?dry_run=1');
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({ reason: 'not_an_object', dry_run: true });
    expect((await get(name, keys.consumer)).status).toBe(404);
    expect(await catalogSeq(prefix)).toBe(seq);
    expect((await readCatalog(prefix)).has(name)).toBe(false);
    expect(await incoming()).toEqual([]);
  });

  it('an upload abandoned mid-body leaves nothing staged and queues nothing', async () => {
    const port = Number(new URL(svc.url!).port);
    const seq = await catalogSeq(prefix);
    const name = 'site_pregame_northwind_basketball.json';
    await new Promise<void>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(
          `PUT /v1/data/${name} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${keys.northwind}\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"bookmaker":"northwind",`,
        );
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 200);
      });
      socket.on('error', () => undefined);
    });
    await new Promise((r) => setTimeout(r, 500));
    expect(await incoming()).toEqual([]);
    expect(await catalogSeq(prefix)).toBe(seq);
    expect(svc.logs.some((l) => l.filename === name && typeof l.msg === 'string' && l.msg.startsWith('drop '))).toBe(false);
  });

  it('the workers remove a staged upload that no job names, by age', async () => {
    await mkdir(join(storeDir(), 'incoming'), { recursive: true });
    const orphan = `p${(Date.now() - 60_000).toString(36)}0badf00d--${LIVE}`;
    await writeFile(join(storeDir(), 'incoming', orphan), '{}');
    await waitFor(async () => !(await incoming()).includes(orphan), 10_000, 'the orphan to be swept');
    expect(svc.logs.some((l) => l.msg === 'removed a staged upload no job is settling' && l.filename === LIVE)).toBe(true);
  });

  it('oddsfiles publish --url: each outcome reported, exit 1 on a rejection; the key from ODDSFILES_KEY; --dry-run', async () => {
    const dir = join(dataDir, 'to-send');
    await mkdir(dir, { recursive: true });
    const good = join(dir, 'site_live_northwind_basketball.json');
    const bad = join(dir, 'site_live_northwind_tennis.json');
    await writeFile(good, tinyDoc('northwind', 'basketball', new Date().toISOString()));
    await writeFile(bad, '{"sport": "soccer"}');
    const dry = await runCli(env, ['publish', '--url', svc.url!, '--key', keys.northwind, '--dry-run', good]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('valid (dry run: would be published)');
    expect((await get('site_live_northwind_basketball.json', keys.consumer)).status).toBe(404);

    const res = await runCli({ ...env, ODDSFILES_KEY: keys.northwind }, ['publish', '--url', svc.url!, good, bad]);
    expect(res.code).toBe(1);
    const lines = res.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/site_live_northwind_basketball\.json\tpublished\tgenerated_at /);
    expect(lines[1]).toMatch(/site_live_northwind_tennis\.json\trejected\tsport_mismatch: /);
    expect((await get('site_live_northwind_basketball.json', keys.consumer)).status).toBe(200);
    const again = await runCli(env, ['publish', '--url', svc.url!, '--key', keys.northwind, '--json', good]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject([{ outcome: 'unchanged', status: 200 }]);
    // Reported as the local publish reports it: superseded names the generated_at that won;
    // a rejection carries its id.
    const published = (JSON.parse(again.stdout) as { generated_at: string }[])[0]!.generated_at;
    const older = join(dir, 'older', 'site_live_northwind_basketball.json');
    await mkdir(dirname(older), { recursive: true });
    await writeFile(older, tinyDoc('northwind', 'basketball', '2026-01-01T00:00:00.000Z'));
    const superseded = await runCli(env, ['publish', '--url', svc.url!, '--key', keys.northwind, older]);
    expect(superseded.stdout).toBe(`${older}\tsuperseded\tgenerated_at 2026-01-01T00:00:00.000Z is not newer than the published ${published}\n`);
    const rejected = await runCli(env, ['publish', '--url', svc.url!, '--key', keys.northwind, '--json', bad]);
    expect(JSON.parse(rejected.stdout)).toMatchObject([{ outcome: 'rejected', reason: 'sport_mismatch', rejectionId: expect.any(String) }]);
    const nokey = await runCli(env, ['publish', '--url', svc.url!, good]);
    expect(nokey.code).toBe(2);
    expect(nokey.stderr).toContain('ODDSFILES_KEY');
    // A PUT always waits for its outcome: --no-wait is refused rather than ignored.
    const nowait = await runCli(env, ['publish', '--url', svc.url!, '--key', keys.northwind, '--no-wait', good]);
    expect(nowait.code).toBe(2);
    expect(nowait.stderr).toContain('--no-wait does not go with --url');
  });

  it('documents PUT in /v1/openapi.json and counts PUTs by outcome in /metrics', async () => {
    const doc = (await (await fetch(`${svc.url}/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { operationId: string; responses: object }>>;
    };
    const op = doc.paths['/v1/data/{filename}']!.put!;
    expect(op.operationId).toBe('putOddsData');
    expect(Object.keys(op.responses)).toEqual(
      expect.arrayContaining(['200', '201', '400', '401', '403', '408', '409', '413', '415', '422', '429', '503', '504']),
    );
    const metrics = await (await fetch(`${svc.url}/metrics`)).text();
    const count = (outcome: string) => Number(new RegExp(`^oddsfiles_http_publish_total\\{outcome="${outcome}"[^}]*\\} (\\d+)`, 'm').exec(metrics)?.[1]);
    expect(count('published')).toBeGreaterThanOrEqual(5);
    expect(count('unchanged')).toBeGreaterThanOrEqual(2);
    expect(count('rejected')).toBeGreaterThanOrEqual(2);
    expect(count('superseded')).toBeGreaterThanOrEqual(1);
  });
});

describe('PUT with no worker running', () => {
  const prefix = uniquePrefix('e2e-put-pending');
  let env: Record<string, string>;
  let reader: RunningOddsfiles | undefined;
  let worker: RunningOddsfiles | undefined;

  afterAll(async () => {
    await reader?.stop();
    await worker?.stop();
    await dropPrefix(prefix);
  });

  it('504 after publish.settle_timeout, saying it is queued; a worker that starts later settles it', async () => {
    const dataDir = await makeDataDir('e2e-put-pending');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), 'plans:\n  pro: { allow: ["*"] }\npublish: { settle_timeout: 500ms }\n');
    env = baseEnv(dataDir, prefix);
    reader = await startOddsfiles(env, ['start', '--roles', 'reader']);
    const key = (await runCli(env, ['keys', 'create', '--name', 'p', '--plan', 'pro', '--publish', '*'])).stdout.trim();
    const doc = tinyDoc('goldcrest', 'soccer', new Date().toISOString());
    const res = await fetch(`${reader.url}/v1/data/site_live_goldcrest_soccer.json`, { method: 'PUT', headers: { 'x-api-key': key }, body: doc });
    expect(res.status).toBe(504);
    expect(await res.json()).toMatchObject({ type: 'https://oddsfiles.dev/problems/publish-pending', outcome: 'pending' });
    expect((await readdir(join(dataDir, 'store', 'incoming'))).length).toBe(1);
    worker = await startOddsfiles(env, ['start', '--roles', 'worker']);
    await waitFor(
      async () => (await fetch(`${reader!.url}/v1/data/site_live_goldcrest_soccer.json`, { headers: { 'x-api-key': key } })).status === 200,
      20_000,
      'the upload to be published',
    );
    await waitFor(async () => (await readdir(join(dataDir, 'store', 'incoming'))).length === 0, 10_000, 'the staged upload to be removed');
    // Sent again: settled at once now, and the same version.
    const again = await fetch(`${reader.url}/v1/data/site_live_goldcrest_soccer.json`, { method: 'PUT', headers: { 'x-api-key': key }, body: doc });
    expect(again.status).toBe(200);
  }, 60_000);
});
