/**
 * Uploads at once per publisher key, end to end: `oddsfiles start` as a child process with
 * `publish.uploads_per_key: 2` and a plan whose `uploads` is 1. A key's bodies that stall
 * mid-way hold its own slots only: its next PUT answers 429 too-many-uploads with Retry-After,
 * while another key's PUT is published; once the stalled connections go, the key publishes again.
 */
import { connect, type Socket } from 'node:net';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { tinyDoc } from '../../helpers/drops.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const CONFIG = `plans:
  single: { allow: [], uploads: 1 }
publish: { uploads_per_key: 2, rate: { max: 100000, per: 1m } }
`;

describe('uploads at once per publisher key', () => {
  const prefix = uniquePrefix('e2e-put-caps');
  let svc: RunningOddsfiles;
  const keys = { a: '', b: '', single: '' };
  const stalled = new Set<Socket>();

  /** Stalled PUTs that were answered (refused: a probe held the slot when they arrived). */
  const answeredStalls = new WeakSet<Socket>();
  /** A PUT whose headers and first bytes arrive, and then nothing more. */
  const stall = (key: string, name: string): Promise<Socket> =>
    new Promise((resolve, reject) => {
      const url = new URL(svc.url!);
      const s = connect(Number(url.port), url.hostname, () => {
        s.write(`PUT /v1/data/${name} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"events":[`);
        resolve(s);
      });
      s.on('data', () => answeredStalls.add(s));
      s.on('error', reject);
      stalled.add(s);
    });
  const put = async (key: string, name: string, query = '') => {
    const res = await fetch(`${svc.url}/v1/data/${name}${query}`, {
      method: 'PUT',
      headers: { 'x-api-key': key },
      body: tinyDoc(name.split('_')[2]!, 'soccer', new Date(Date.now() - 1000).toISOString()),
    });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Record<string, unknown> };
  };
  /**
   * A dry run asks the same caps and leaves nothing behind: 429 once the key's slots are taken by
   * `stalls`. A dry run that reached the reader before a stalled PUT held the slot for its moment,
   * and that PUT was refused: it is stalled again.
   */
  const capped = (key: string, name: string, stalls: Socket[]) =>
    waitFor(async () => {
      for (const [i, s] of stalls.entries()) {
        if (!answeredStalls.has(s)) continue;
        s.destroy();
        stalls[i] = await stall(key, name);
      }
      const status = (await put(key, name, '?dry_run=1')).status;
      return status === 429 && stalls.every((s) => !answeredStalls.has(s)) ? true : undefined;
    }, 45_000);

  beforeAll(async () => {
    const dataDir = await makeDataDir('e2e-put-caps');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), CONFIG);
    const env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    const make = async (args: string[]) => {
      const res = await runCli(env, ['keys', 'create', ...args]);
      expect(res.code, res.stderr).toBe(0);
      return res.stdout.trim();
    };
    keys.a = await make(['--name', 'a', '--publish', 'site_*_northwind*']);
    keys.b = await make(['--name', 'b', '--publish', 'site_*_bluewater*']);
    keys.single = await make(['--name', 'single', '--plan', 'single', '--publish', 'site_*_hillview*']);
  }, 60_000);

  afterEach(() => {
    for (const s of stalled) s.destroy();
    stalled.clear();
  });

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it("one key's stalled uploads: its next PUT is 429 with Retry-After; another key publishes; then the first key publishes again", async () => {
    const name = 'site_live_northwind_soccer.json';
    await capped(keys.a, name, [await stall(keys.a, name), await stall(keys.a, name)]);
    const refused = await put(keys.a, name);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ type: 'https://oddsfiles.dev/problems/too-many-uploads', status: 429 });
    expect(Number(refused.retryAfter)).toBeGreaterThan(0);

    const other = await put(keys.b, 'site_live_bluewater_soccer.json');
    expect(other.status, JSON.stringify(other.body)).toBe(201);

    for (const s of stalled) s.destroy();
    const again = await waitFor(async () => {
      const r = await put(keys.a, name);
      return r.status === 429 ? undefined : r;
    });
    expect(again.status, JSON.stringify(again.body)).toBe(201);
  }, 60_000);

  it("a plan's `uploads` replaces the default", async () => {
    const name = 'site_live_hillview_soccer.json';
    await capped(keys.single, name, [await stall(keys.single, name)]);
    expect((await put(keys.single, name)).status).toBe(429);
    expect((await put(keys.a, 'site_pregame_northwind_soccer.json')).status).toBe(201);
  }, 60_000);
});
