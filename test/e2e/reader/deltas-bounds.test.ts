/**
 * Deltas stay bounded, end to end (`oddsfiles start`, fs store, `deltas.max_bytes` 300 KB): a file
 * above the bound answers 200 and 304 as without A-IM; clients asking for patches from every older
 * base at once get 226 or 200 and never a 5xx, while /healthz keeps answering; a base whose bytes
 * the store lost is answered with the whole file, and so is a base the build has not finished
 * within `deltas.max_wait`.
 */
import { createHash } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLE_FEEDS, generateDocument } from '../../fixtures/corpus.js';
import { drop } from '../../helpers/drops.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const SMALL = 'site_live_northwind_soccer.json';
const BIG = 'site_live_bluewater_tennis.json';
const THIRD = 'site_live_northwind_tennis.json';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const etagOf = (b: Buffer) => `"${sha(b).slice(0, 32)}"`;
type Doc = { generated_at: string; events: { markets: { selections: { odds: number }[] }[] }[] };

describe('deltas within bounds', () => {
  const prefix = uniquePrefix('e2e-deltas-bounds');
  let dataDir: string;
  let svc: RunningOddsfiles;
  let key: string;
  let clock = Date.now() - 600_000;
  const versions: Record<string, Buffer[]> = { [SMALL]: [], [BIG]: [], [THIRD]: [] };

  const get = (name: string, headers: Record<string, string> = {}) =>
    fetch(`${svc.url!}/v1/data/${name}`, { headers: { 'x-api-key': key, 'accept-encoding': 'identity', ...headers } });
  /** A new version of `name` (about `bytes`, every 20th price moved from the last), published and served. */
  const publish = async (name: string, bytes: number) => {
    const last = versions[name]!.at(-1);
    const doc = JSON.parse(
      (
        last ??
        generateDocument(
          EXAMPLE_FEEDS.find((f) => f.filename === name)!,
          { targetBytes: bytes },
        )
      ).toString(),
    ) as Doc;
    doc.generated_at = new Date((clock += 1000)).toISOString();
    let i = versions[name]!.length;
    for (const e of doc.events) for (const m of e.markets) for (const s of m.selections) if (i++ % 20 === 0) s.odds = Math.round(s.odds * 100 + 7) / 100;
    const b = Buffer.from(JSON.stringify(doc, null, 1));
    versions[name]!.push(b);
    await drop(join(dataDir, 'inbox'), name, b);
    await waitFor(async () => (await get(name)).headers.get('etag') === etagOf(b), 20_000, `${name} served`);
  };

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-deltas-bounds');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), 'plans:\n  pro: { allow: ["*"], rate: { max: 1000000, per: 1m } }\ndeltas: { max_bytes: 300000 }\n');
    const env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    const res = await runCli(env, ['keys', 'create', '--name', 'pro', '--plan', 'pro']);
    expect(res.code, res.stderr).toBe(0);
    key = res.stdout.trim();
    for (let n = 0; n < 6; n++) await publish(SMALL, 150_000);
    for (let n = 0; n < 2; n++) await publish(BIG, 600_000);
  }, 120_000);

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it('a file above deltas.max_bytes answers 200 with the whole file, and 304 when current, as without A-IM', async () => {
    const [a, b] = versions[BIG]!;
    expect(b!.length).toBeGreaterThan(300_000);
    const res = await get(BIG, { 'a-im': 'json-patch, merge-patch', 'if-none-match': etagOf(a!) });
    expect(res.status).toBe(200);
    expect(res.headers.get('im')).toBeNull();
    expect(Buffer.from(await res.arrayBuffer()).equals(b!)).toBe(true);
    expect((await get(BIG, { 'a-im': 'json-patch', 'if-none-match': etagOf(b!) })).status).toBe(304);
  });

  it('clients asking for patches from every older base at once: 226 or 200, never a 5xx; /healthz answers all along', async () => {
    const bases = versions[SMALL]!.slice(0, -1).map(etagOf);
    const statuses: number[] = [];
    let done = false;
    const health = (async () => {
      const seen: number[] = [];
      while (!done) {
        const res = await fetch(`${svc.url!}/healthz`, { signal: AbortSignal.timeout(5000) });
        seen.push(res.status);
        await res.arrayBuffer();
      }
      return seen;
    })();
    await Promise.all(
      [0, 1, 2, 3].map(async (c) => {
        for (let r = 0; r < 20; r++) {
          const res = await get(SMALL, { 'a-im': 'json-patch', 'if-none-match': bases[(c + r) % bases.length]!, 'accept-encoding': 'gzip' });
          await res.arrayBuffer();
          statuses.push(res.status);
        }
      }),
    );
    done = true;
    const healthz = await health;
    expect(statuses.every((s) => s === 226 || s === 200)).toBe(true);
    expect(statuses).toContain(226);
    expect(healthz.length).toBeGreaterThan(0);
    expect(healthz.every((s) => s === 200)).toBe(true);
  });

  it('a base the store no longer has: the whole file, not a 5xx', async () => {
    for (let n = 0; n < 3; n++) await publish(THIRD, 100_000);
    const [gone] = versions[THIRD]!;
    await rm(join(dataDir, 'store', 'objects', THIRD, `${sha(gone!)}.json`));
    const res = await get(THIRD, { 'a-im': 'json-patch', 'if-none-match': etagOf(gone!) });
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(versions[THIRD]!.at(-1)!)).toBe(true);
    // The version before the current one is held in memory: its patch is served all the same.
    expect((await get(THIRD, { 'a-im': 'json-patch', 'if-none-match': etagOf(versions[THIRD]![1]!) })).status).toBe(226);
  });
});
