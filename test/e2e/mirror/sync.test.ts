/**
 * `oddsfiles mirror` end to end against `oddsfiles start` and real Redis: 200 versions of three
 * files, dropped into the inbox and PUT over HTTP in turn, followed into a folder; the mirror is
 * killed with SIGKILL and started again, and the service is restarted, in the middle. At the end
 * the folder holds exactly the bytes of each file's last version, patches were used on the way,
 * and a further `--once` fetches nothing (what the folder holds is recognised). Also: `--exec`
 * runs per change with the filename and ETag in its environment, and the client package's own
 * `oddsfiles-mirror` command syncs the same bytes.
 */
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drop } from '../../helpers/drops.js';
import { freePort } from '../../helpers/faults.js';
import { mirrored, oddsVersions, startMirror, type RunningMirror } from '../../helpers/mirror.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, ROOT, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const FILES = ['site_live_northwind_soccer.json', 'site_live_bluewater_tennis.json', 'site_pregame_northwind_soccer.json'];
const etagOf = (b: Buffer) => `"${createHash('sha256').update(b).digest('hex').slice(0, 32)}"`;

describe('oddsfiles mirror end to end', () => {
  const prefix = uniquePrefix('e2e-mirror-sync');
  let dataDir: string;
  let env: Record<string, string>;
  let svc: RunningOddsfiles | undefined;
  let url: string;
  let reader: string;
  let publisher: string;
  const mirrors: RunningMirror[] = [];
  let clock = Date.now() - 3_600_000;
  const makers = Object.fromEntries(FILES.map((f) => [f, oddsVersions(f)]));
  const last: Record<string, Buffer> = {};

  const mirrorEnv = () => ({ PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ODDSFILES_KEY: reader });
  const start = async () => {
    svc = await startOddsfiles(env);
  };
  const mirror = (args: string[], bin?: string[]) => {
    const m = startMirror(args, mirrorEnv(), bin);
    mirrors.push(m);
    return m;
  };
  /** Version n of a file: by drop (even n) or by PUT (odd n). */
  const publish = async (n: number) => {
    const name = FILES[n % FILES.length]!;
    clock += 1000;
    const bytes = makers[name]!(clock);
    last[name] = bytes;
    if (Math.floor(n / FILES.length) % 2 === 0) return drop(join(dataDir, 'inbox'), name, bytes);
    await put(name, bytes);
  };
  /** PUT as a publisher does: a 503 (a busy machine) waited out for its Retry-After. */
  const put = async (name: string, bytes: Buffer) => {
    for (let attempt = 0; ; attempt++) {
      const res = await fetch(`${url}/v1/data/${name}`, {
        method: 'PUT',
        headers: { 'x-api-key': publisher, 'content-type': 'application/json' },
        body: bytes,
      });
      const text = await res.text();
      if (res.status === 503 && attempt < 10) {
        await new Promise((r) => setTimeout(r, 1000 * Math.min(5, Number(res.headers.get('retry-after') ?? 1))));
        continue;
      }
      expect([200, 201], text).toContain(res.status);
      return;
    }
  };
  const servedEtag = async (name: string) =>
    (await fetch(`${url}/v1/data/${name}`, { method: 'HEAD', headers: { 'x-api-key': reader, 'accept-encoding': 'identity' } })).headers.get('etag');
  /** Every file's last version published and served. */
  const settled = () =>
    waitFor(
      async () => (await Promise.all(FILES.map(async (f) => (await servedEtag(f)) === etagOf(last[f]!)))).every(Boolean),
      60_000,
      'the last versions served',
    );
  const identical = (dir: string) =>
    waitFor(
      async () => {
        const got = await mirrored(dir, FILES);
        return FILES.every((f) => got[f]?.equals(last[f]!));
      },
      60_000,
      'the folder to hold the last versions',
    ).catch((err: Error) => {
      throw new Error(`${err.message}; mirror stderr: ${mirrors.at(-1)?.stderr().slice(-1500)}`);
    });

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-mirror-sync');
    await writeFile(
      join(dataDir, 'oddsfiles.yaml'),
      [
        'plans:',
        '  pro: { allow: ["*"], rate: { max: 100000, per: 1m } }',
        'publish: { rate: { max: 100000, per: 1m } }',
        // Patches are what this test follows: a busy machine may take longer than the default second to build one.
        'deltas: { max_wait: 30s }',
        '',
      ].join('\n'),
    );
    env = baseEnv(dataDir, prefix, { PORT: String(await freePort()) });
    await start();
    url = svc!.url!;
    reader = (await runCli(env, ['keys', 'create', '--name', 'consumer', '--plan', 'pro'])).stdout.trim();
    publisher = (await runCli(env, ['keys', 'create', '--name', 'publisher', '--publish', 'site_*'])).stdout.trim();
    expect(reader).toMatch(/^odf_/);
    expect(publisher).toMatch(/^odf_/);
  }, 60_000);

  afterAll(async () => {
    for (const m of mirrors) await m.kill('SIGKILL');
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it('keeps the folder byte-identical through 200 changes, a kill -9 of the mirror and a restart of the service', async () => {
    const dir = join(dataDir, 'mirror');
    for (let n = 0; n < FILES.length; n++) await publish(n);
    await settled();
    let m = mirror(['--url', url, '--json', dir]);
    await identical(dir);

    for (let n = FILES.length; n < 80; n++) await publish(n);
    await m.waitForLine((l) => l.event === 'update' && l.etag === etagOf(last[FILES[79 % 3]!]!));
    await m.kill('SIGKILL');
    for (let n = 80; n < 110; n++) await publish(n);
    await settled();
    m = mirror(['--url', url, '--json', dir]);
    await identical(dir);

    for (let n = 110; n < 140; n++) await publish(n);
    await settled();
    await identical(dir);
    expect(await svc!.stop()).toBe(0);
    await start();
    for (let n = 140; n < 200; n++) await publish(n);
    await settled();
    await identical(dir);

    // Patches were used on the way, and every update named the bytes it wrote.
    const updates = mirrors.flatMap((x) => x.lines).filter((l) => l.event === 'update');
    expect(updates.some((l) => l.via === 'patch')).toBe(true);
    expect(updates.every((l) => typeof l.etag === 'string' && typeof l.lag_ms === 'object')).toBe(true);
    expect(await m.kill('SIGTERM')).toBe(0);
    const state = JSON.parse(await readFile(join(dir, '.oddsfiles-mirror.json'), 'utf8')) as { position: number; files: Record<string, { etag: string }> };
    expect(Object.keys(state.files).sort()).toEqual([...FILES].sort());
    for (const f of FILES) expect(state.files[f]!.etag).toBe(etagOf(last[f]!));

    // What the folder holds is not fetched again.
    const once = mirror(['--url', url, '--json', '--once', dir]);
    expect(await once.exited, once.stderr()).toBe(0);
    expect(once.lines.filter((l) => l.event === 'update')).toEqual([]);
    expect(once.lines.at(-1)).toMatchObject({ event: 'synced', files: 3, updated: 0 });
  }, 240_000);

  it("fetches whole what a patch cannot rebuild byte for byte (a layout not JSON.stringify's), and stays identical", async () => {
    const name = 'site_live_redstone_soccer.json';
    const make = oddsVersions(name);
    // Compact, with a space after each colon: the patched value is right, its bytes are not.
    const odd = () => {
      clock += 1000;
      return Buffer.from(JSON.stringify(JSON.parse(make(clock).toString())).replace(/":/g, '": '));
    };
    const dir = join(dataDir, 'odd');
    let bytes = odd();
    await put(name, bytes);
    const first = mirror(['--url', url, '--once', '--json', dir]);
    expect(await first.exited, first.stderr()).toBe(0);
    bytes = odd();
    await put(name, bytes);
    const second = mirror(['--url', url, '--once', '--json', dir]);
    expect(await second.exited, second.stderr()).toBe(0);
    expect(second.lines.filter((l) => l.filename === name)).toMatchObject([{ event: 'update', via: 'whole', etag: etagOf(bytes) }]);
    expect((await mirrored(dir, [name]))[name]?.equals(bytes)).toBe(true);
  });

  it('runs --exec for each change with the filename and ETag, and the package command syncs the same bytes', async () => {
    const dir = join(dataDir, 'exec');
    const log = join(dataDir, 'exec.log');
    const once = mirror(['--url', url, '--once', '--exec', `echo "$ODDSFILES_EVENT $ODDSFILES_FILE $ODDSFILES_ETAG" >> ${log}`, dir]);
    expect(await once.exited, once.stderr()).toBe(0);
    const ran = (await readFile(log, 'utf8')).trim().split('\n').sort();
    for (const f of FILES) expect(ran).toContain(`update ${f} ${etagOf(last[f]!)}`);
    expect(ran).toHaveLength(4);
    expect(once.lines.at(-1)?.text).toMatch(/^4 files current in .* at position \d+ \(4 updated, 0 removed\)$/);

    const own = join(dataDir, 'own');
    const pkg = mirror(['--url', url, '--once', own], [join(ROOT, 'packages/client/oddsfiles-mirror.mjs')]);
    expect(await pkg.exited, pkg.stderr()).toBe(0);
    await identical(own);
  });
});
