/**
 * Deltas (RFC 3229) end to end, against `oddsfiles start` with the fs store: a client holding an
 * earlier version asks with If-None-Match and A-IM, gets `226 IM Used` with a JSON Patch or a JSON
 * Merge Patch that rebuilds the current version as a JSON value, and the canonical digest to check
 * it; the whole file (200) when the base is unknown or too old or the patch would not be smaller,
 * 304 when current, the usual answers without A-IM, and never a 5xx for hostile headers.
 */
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import canonicalize from 'canonicalize';
import jsonpatch from 'fast-json-patch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMergePatch, type Json } from '../../../src/reader/deltas/merge-patch.js';
import { EXAMPLE_FEEDS, generateDocument } from '../../fixtures/corpus.js';
import { drop } from '../../helpers/drops.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const LIVE = 'site_live_northwind_soccer.json';
const OTHER = 'site_live_bluewater_tennis.json';
const feed = (name: string) => EXAMPLE_FEEDS.find((f) => f.filename === name)!;
const etagOf = (b: Buffer) => `"${createHash('sha256').update(b).digest('hex').slice(0, 32)}"`;
const digestOf = (doc: unknown) => createHash('sha256').update(canonicalize(doc)!).digest('hex');
type Doc = { generated_at: string; events: { markets: { selections: { odds: number }[] }[] }[] };

describe('deltas end to end', () => {
  const prefix = uniquePrefix('e2e-deltas');
  let dataDir: string;
  let svc: RunningOddsfiles;
  let key: string;
  let clock = Date.now() - 600_000;
  const stamp = () => new Date((clock += 1000)).toISOString();

  const get = (name: string, headers: Record<string, string> = {}) => fetch(`${svc.url!}/v1/data/${name}`, { headers: { 'x-api-key': key, ...headers } });
  /** Publish `bytes` under `name` and wait until the reader serves them. */
  const publish = async (name: string, bytes: Buffer) => {
    await drop(join(dataDir, 'inbox'), name, bytes);
    const etag = etagOf(bytes);
    await waitFor(async () => (await get(name, { 'accept-encoding': 'identity' })).headers.get('etag') === etag, 20_000, `${name} served`);
    return etag;
  };
  const docOf = (b: Buffer) => JSON.parse(b.toString('utf8')) as Doc;
  const pretty = (d: unknown) => Buffer.from(JSON.stringify(d, null, 2));

  let a: Buffer;
  let b: Buffer;
  let etagA: string;
  let etagB: string;

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-deltas');
    // A long deltas.max_wait: these tests are about the patches, not the bound on waiting for one
    // (a busy machine can take longer than the default second to build a pair).
    await writeFile(join(dataDir, 'oddsfiles.yaml'), 'plans:\n  pro: { allow: ["*"], rate: { max: 100000, per: 1m } }\ndeltas:\n  max_wait: 30s\n');
    const env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    const res = await runCli(env, ['keys', 'create', '--name', 'pro', '--plan', 'pro']);
    expect(res.code, res.stderr).toBe(0);
    key = res.stdout.trim();
    // A ~200 KB live file, then B: a later generated_at and 5 % of the prices changed.
    a = generateDocument(feed(LIVE), { targetBytes: 200_000, generatedAt: stamp() });
    const doc = docOf(a);
    doc.generated_at = stamp();
    let i = 0;
    for (const e of doc.events) for (const m of e.markets) for (const s of m.selections) if (i++ % 20 === 0) s.odds = Math.round(s.odds * 100 + 7) / 100;
    b = pretty(doc);
    etagA = await publish(LIVE, a);
    etagB = await publish(LIVE, b);
  }, 90_000);

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it('answers a merge patch (226) that turns A into B as a JSON value, with the canonical digest of B', async () => {
    const res = await get(LIVE, { 'if-none-match': etagA, 'a-im': 'merge-patch', 'accept-encoding': 'identity' });
    expect(res.status).toBe(226);
    expect(res.headers.get('im')).toBe('merge-patch');
    expect(res.headers.get('content-type')).toBe('application/merge-patch+json');
    expect(res.headers.get('etag')).toBe(etagB);
    expect(res.headers.get('delta-base')).toBe(etagA);
    expect(res.headers.get('vary')).toBe('Accept-Encoding, A-IM, If-None-Match');
    const patch = (await res.json()) as Json;
    const rebuilt = applyMergePatch(docOf(a) as unknown as Json, patch);
    expect(rebuilt).toEqual(docOf(b));
    expect(res.headers.get('json-canonical-sha256')).toBe(digestOf(docOf(b)));
    expect(digestOf(rebuilt)).toBe(digestOf(docOf(b)));
  });

  it('answers a JSON Patch (226) that is a small fraction of the file, also compressed, and picks it from a list', async () => {
    const res = await get(LIVE, { 'if-none-match': `W/"x", ${etagA}`, 'a-im': 'json-patch, merge-patch', 'accept-encoding': 'identity' });
    expect(res.status).toBe(226);
    expect(res.headers.get('im')).toBe('json-patch');
    expect(res.headers.get('content-type')).toBe('application/json-patch+json');
    const body = Buffer.from(await res.arrayBuffer());
    expect(body.length).toBeLessThan(b.length / 10);
    const ops = JSON.parse(body.toString()) as jsonpatch.Operation[];
    expect(jsonpatch.applyPatch(docOf(a), ops).newDocument).toEqual(docOf(b));
    // gzip accepted: the patch comes gzip-encoded, smaller than the gzip file (fetch decodes it).
    const gz = await get(LIVE, { 'if-none-match': etagA, 'a-im': 'json-patch', 'accept-encoding': 'gzip' });
    const full = await get(LIVE, { 'accept-encoding': 'gzip' });
    expect(gz.status).toBe(226);
    expect(gz.headers.get('content-encoding')).toBe('gzip');
    expect(Number(gz.headers.get('content-length'))).toBeLessThan(Number(full.headers.get('content-length')) / 10);
    expect(jsonpatch.applyPatch(docOf(a), (await gz.json()) as jsonpatch.Operation[]).newDocument).toEqual(docOf(b));
  });

  it('answers the whole file (200) with the digest when the base is unknown', async () => {
    const res = await get(LIVE, { 'if-none-match': `"${'0'.repeat(32)}"`, 'a-im': 'json-patch', 'accept-encoding': 'identity' });
    expect(res.status).toBe(200);
    expect(res.headers.get('im')).toBeNull();
    expect(res.headers.get('json-canonical-sha256')).toBe(digestOf(docOf(b)));
    expect(Buffer.from(await res.arrayBuffer()).equals(b)).toBe(true);
  });

  it('answers 304 when the base is current, and the usual answers without A-IM', async () => {
    const same = await get(LIVE, { 'if-none-match': etagB, 'a-im': 'json-patch', 'accept-encoding': 'identity' });
    expect(same.status).toBe(304);
    expect(same.headers.get('vary')).toBe('Accept-Encoding, A-IM');
    const plain = await get(LIVE, { 'if-none-match': etagA, 'accept-encoding': 'identity' });
    expect(plain.status).toBe(200);
    expect(plain.headers.get('vary')).toBe('Accept-Encoding, A-IM');
    expect(plain.headers.get('json-canonical-sha256')).toBeNull();
    expect(Buffer.from(await plain.arrayBuffer()).equals(b)).toBe(true);
    expect((await get(LIVE, { 'if-none-match': etagB, 'accept-encoding': 'identity' })).status).toBe(304);
    // Any coding's ETag of the version held is current: a patched copy keeps the plain ETag of a
    // 226 and asks again with gzip; a copy fetched with gzip asks again without it.
    const gz = await get(LIVE, { 'if-none-match': etagB, 'a-im': 'json-patch', 'accept-encoding': 'gzip' });
    expect(gz.status).toBe(304);
    expect(gz.headers.get('etag')).toBe(`${etagB.slice(0, -1)}-gz"`);
    expect((await get(LIVE, { 'if-none-match': `${etagB.slice(0, -1)}-gz"`, 'accept-encoding': 'identity' })).status).toBe(304);
    expect((await get(LIVE, { 'if-none-match': `W/${etagB.slice(0, -1)}-br"`, 'accept-encoding': 'gzip' })).status).toBe(304);
  });

  it('answers the whole file when the patch would not be smaller, or the base is more than 8 versions back', async () => {
    const first = generateDocument(feed(OTHER), { generatedAt: stamp() });
    const firstEtag = await publish(OTHER, first);
    // Every event different (another seed), without whitespace: a JSON Patch of every value is larger than the file.
    const other = Buffer.from(JSON.stringify(docOf(generateDocument(feed(OTHER), { generatedAt: stamp(), seed: 7 }))));
    await publish(OTHER, other);
    const big = await get(OTHER, { 'if-none-match': firstEtag, 'a-im': 'json-patch', 'accept-encoding': 'identity' });
    expect(big.status).toBe(200);
    expect(big.headers.get('json-canonical-sha256')).toBe(digestOf(docOf(other)));
    expect(Buffer.from(await big.arrayBuffer()).equals(other)).toBe(true);
    // Nine more versions (generated_at only): `other` is now 9 back, the next one 8 back.
    const etags: string[] = [];
    for (let n = 0; n < 9; n++) {
      const d = docOf(other);
      d.generated_at = stamp();
      etags.push(await publish(OTHER, pretty(d)));
    }
    const tooOld = await get(OTHER, { 'if-none-match': etagOf(other), 'a-im': 'merge-patch', 'accept-encoding': 'identity' });
    expect(tooOld.status).toBe(200);
    expect(tooOld.headers.get('json-canonical-sha256')).not.toBeNull();
    const eightBack = await get(OTHER, { 'if-none-match': etags[0]!, 'a-im': 'merge-patch', 'accept-encoding': 'identity' });
    expect(eightBack.status).toBe(226);
  }, 60_000);

  it('never answers a hostile A-IM or ETag with a 5xx', async () => {
    const cases: Record<string, string>[] = [
      { 'a-im': 'json-patch;q=abc, merge-patch;q=0', 'if-none-match': etagA },
      { 'a-im': ';;,,, ,json-patch;;q', 'if-none-match': etagA },
      { 'a-im': 'x'.repeat(4000), 'if-none-match': etagA },
      { 'a-im': 'json-patch', 'if-none-match': `"${'g'.repeat(32)}", "${etagA}`.repeat(50) },
      { 'a-im': 'json-patch', 'if-none-match': '*' },
      { 'a-im': 'json-patch', 'if-none-match': `"${etagA.slice(1, 20)}"` },
      { 'a-im': 'json-patch', 'if-none-match': `${etagA.slice(0, -1)}-zz"` },
      { 'a-im': 'merge-patch', 'if-none-match': `W/${etagA.slice(0, -1)}-br"` },
    ];
    const statuses: number[] = [];
    for (const h of cases) {
      const res = await get(LIVE, { ...h, 'accept-encoding': 'identity' });
      await res.arrayBuffer();
      statuses.push(res.status);
      if (res.status === 200) expect(res.headers.get('json-canonical-sha256')).toBe(digestOf(docOf(b)));
    }
    expect(statuses.every((s) => s < 500)).toBe(true);
    // `*` matches the current version; the etag of A's br form names A.
    expect(statuses[4]).toBe(304);
    expect(statuses[7]).toBe(226);
  });
});
