/**
 * `oddsfiles mirror` resuming from a position the change log no longer keeps (trimmed past it
 * while the mirror was stopped): the stream answers 410, the mirror lists again from the catalog,
 * and the folder ends with the current version of every file, none stale, then follows on (with
 * `--conflate`, which the stream takes).
 */
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drop } from '../../helpers/drops.js';
import { mirrored, oddsVersions, startMirror, type RunningMirror } from '../../helpers/mirror.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const FILES = ['site_live_northwind_soccer.json', 'site_live_bluewater_tennis.json', 'site_pregame_northwind_soccer.json'];
const etagOf = (b: Buffer) => `"${createHash('sha256').update(b).digest('hex').slice(0, 32)}"`;

describe('oddsfiles mirror after the change log moved past it', () => {
  const prefix = uniquePrefix('e2e-mirror-reset');
  let dataDir: string;
  let svc: RunningOddsfiles;
  let key: string;
  let redis: Redis;
  const mirrors: RunningMirror[] = [];
  let clock = Date.now() - 3_600_000;
  const makers = Object.fromEntries(FILES.map((f) => [f, oddsVersions(f, 4000)]));
  const last: Record<string, Buffer> = {};

  const publish = async (name: string) => {
    clock += 1000;
    last[name] = makers[name]!(clock);
    await drop(join(dataDir, 'inbox'), name, last[name]);
    await waitFor(
      async () =>
        (await fetch(`${svc.url}/v1/data/${name}`, { method: 'HEAD', headers: { 'x-api-key': key, 'accept-encoding': 'identity' } })).headers.get('etag') ===
        etagOf(last[name]!),
      30_000,
      `${name} served`,
    );
  };
  const mirror = (dir: string, extra: string[] = []) => {
    const m = startMirror(['--url', svc.url!, '--json', ...extra, dir], { PATH: process.env.PATH ?? '', ODDSFILES_KEY: key });
    mirrors.push(m);
    return m;
  };
  const current = (dir: string) =>
    waitFor(
      async () => {
        const got = await mirrored(dir, FILES);
        return FILES.every((f) => got[f]?.equals(last[f]!));
      },
      30_000,
      'the folder to hold the current versions',
    );

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-mirror-reset');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), ['plans:', '  pro: { allow: ["*"], rate: { max: 100000, per: 1m } }', ''].join('\n'));
    const env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    key = (await runCli(env, ['keys', 'create', '--name', 'consumer', '--plan', 'pro'])).stdout.trim();
    redis = new Redis(TEST_REDIS_URL);
  }, 60_000);

  afterAll(async () => {
    for (const m of mirrors) await m.kill('SIGKILL');
    await svc?.stop();
    redis?.disconnect();
    await dropPrefix(prefix);
  });

  it('lists again from the catalog and leaves nothing stale', async () => {
    const dir = join(dataDir, 'mirror');
    for (const f of FILES) await publish(f);
    let m = mirror(dir);
    await current(dir);
    expect(await m.kill('SIGTERM')).toBe(0);
    const stopped = (JSON.parse(await readFile(join(dir, '.oddsfiles-mirror.json'), 'utf8')) as { position: number }).position;

    // While it is stopped: new versions of two files, and the log trimmed to its last entry.
    for (let i = 0; i < 3; i++) {
      await publish(FILES[0]!);
      await publish(FILES[2]!);
    }
    await redis.xtrim(`${prefix}:catalog:log`, 'MAXLEN', 1);
    const gone = await fetch(`${svc.url}/v1/stream`, { headers: { 'x-api-key': key, 'last-event-id': String(stopped) } });
    expect(gone.status).toBe(410);
    await gone.body?.cancel();

    // Conflated this time: the stream's conflate parameter as the mirror passes it.
    m = mirror(dir, ['--conflate', '200']);
    await current(dir);
    await m.waitForStderr(new RegExp(`listing again: position ${stopped} is no longer in the change log`));
    // Only what changed was fetched again (listed in name order: a refetch of FILES[1] would come first).
    await m.waitForLine((l) => l.event === 'update' && l.filename === FILES[2]);
    const updated = m.lines.filter((l) => l.event === 'update').map((l) => l.filename);
    expect(updated.sort()).toEqual([FILES[0], FILES[2]].sort());
    // And it follows on from the catalog's position.
    await publish(FILES[1]!);
    await current(dir);
    await m.kill();
  }, 120_000);
});
