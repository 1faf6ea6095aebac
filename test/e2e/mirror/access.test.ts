/**
 * `oddsfiles mirror` when the service refuses or the folder cannot be written, against
 * `oddsfiles start`: a key whose allow-list shrinks (the plan changed, the service restarted) has
 * the files it lost removed; an unknown key (401) and a revoked one stop the mirror with exit 1;
 * 403 stops it, 429 and 503 are waited out for their Retry-After (the 503s and 403s come from a
 * pass-through proxy in front of the service that answers for it a given number of times); a bad
 * URL, an unreachable service and a URL that is not the service are clear errors; a folder that
 * cannot be written is reported and retried until it can, or given up with exit 1 by `--once`.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { request, createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chmod, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { drop } from '../../helpers/drops.js';
import { freePort } from '../../helpers/faults.js';
import { mirrored, oddsVersions, startMirror, type RunningMirror } from '../../helpers/mirror.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const LIVE = 'site_live_northwind_soccer.json';
const LIVE2 = 'site_live_bluewater_tennis.json';
const PREGAME = 'site_pregame_northwind_soccer.json';
const FILES = [LIVE, LIVE2, PREGAME];
const etagOf = (b: Buffer) => `"${createHash('sha256').update(b).digest('hex').slice(0, 32)}"`;
const config = (allow: string) =>
  [
    'plans:',
    `  consumer: { allow: [${allow}], rate: { max: 100000, per: 1m } }`,
    '  all: { allow: ["*"], rate: { max: 100000, per: 1m } }',
    '  tight: { allow: ["*"], rate: { max: 2, per: 2s } }',
    '',
  ].join('\n');

/** A pass-through to the service that answers `status` itself for the next `times` requests. */
async function startProxy(target: string) {
  const inject: { status: number; times: number; retryAfter: string }[] = [];
  let injected = 0;
  const server: Server = createServer((req, res) => {
    const next = inject[0];
    if (next) {
      if (--next.times <= 0) inject.shift();
      injected++;
      res.writeHead(next.status, { 'content-type': 'application/problem+json', 'retry-after': next.retryAfter });
      res.end(JSON.stringify({ type: 'about:blank', title: 'injected', status: next.status, detail: `injected ${next.status}` }));
      return;
    }
    const up = request(new URL(req.url!, target), { method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode!, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    answer: (status: number, times: number, retryAfter = '1') => inject.push({ status, times, retryAfter }),
    get injected() {
      return injected;
    },
    stop: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('oddsfiles mirror: refusals and failures', () => {
  const prefix = uniquePrefix('e2e-mirror-access');
  let dataDir: string;
  let env: Record<string, string>;
  let svc: RunningOddsfiles | undefined;
  let url: string;
  const keys: Record<string, string> = {};
  const mirrors: RunningMirror[] = [];
  let clock = Date.now() - 3_600_000;
  const makers = Object.fromEntries(FILES.map((f) => [f, oddsVersions(f, 4000)]));
  const last: Record<string, Buffer> = {};

  const mirror = (args: string[], key: string) => {
    const m = startMirror(args, { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ODDSFILES_KEY: key });
    mirrors.push(m);
    return m;
  };
  const publish = async (name: string) => {
    clock += 1000;
    last[name] = makers[name]!(clock);
    await drop(join(dataDir, 'inbox'), name, last[name]);
    await waitFor(
      async () =>
        (await fetch(`${url}/v1/data/${name}`, { method: 'HEAD', headers: { 'x-api-key': keys.all!, 'accept-encoding': 'identity' } })).headers.get('etag') ===
        etagOf(last[name]!),
      30_000,
      `${name} served`,
    );
  };
  const holds = (dir: string, names: readonly string[]) =>
    waitFor(
      async () => {
        const got = await mirrored(dir, names);
        return names.every((n) => got[n]?.equals(last[n]!));
      },
      30_000,
      `${dir} to hold ${names.join(', ')}`,
    );

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-mirror-access');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), config('"site_live_*", "site_pregame_*"'));
    env = baseEnv(dataDir, prefix, { PORT: String(await freePort()) });
    svc = await startOddsfiles(env);
    url = svc.url!;
    for (const [name, plan] of [
      ['consumer', 'consumer'],
      ['all', 'all'],
      ['tight', 'tight'],
      ['doomed', 'all'],
    ] as const) {
      keys[name] = (await runCli(env, ['keys', 'create', '--name', name, '--plan', plan])).stdout.trim();
      expect(keys[name]).toMatch(/^odf_/);
    }
    for (const f of FILES) await publish(f);
  }, 90_000);

  // A failure here is most often the service's (a restart): say how it is.
  beforeEach(({ onTestFailed }) =>
    onTestFailed(() => {
      const p = svc?.proc;
      console.error(
        `the service: exit ${p?.exitCode ?? '-'} ${p?.signalCode ?? ''}; stderr: ${svc?.stderr().slice(-2000)}; last logs: ${JSON.stringify(svc?.logs.slice(-8))}`,
      );
    }),
  );

  afterAll(async () => {
    for (const m of mirrors) await m.kill('SIGKILL');
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it('removes the files a key may no longer read once its plan shrinks (and keeps them with --keep)', async () => {
    const dir = join(dataDir, 'shrink');
    const kept = join(dataDir, 'shrink-keep');
    const m = mirror(['--url', url, '--json', dir], keys.consumer!);
    const k = mirror(['--url', url, '--json', '--keep', kept], keys.consumer!);
    await holds(dir, FILES);
    await holds(kept, FILES);
    expect(await svc!.stop()).toBe(0);
    await writeFile(join(dataDir, 'oddsfiles.yaml'), config('"site_live_*"'));
    svc = await startOddsfiles(env);
    await m.waitForLine((l) => l.event === 'remove' && l.filename === PREGAME, 60_000);
    await k.waitForLine((l) => l.event === 'remove' && l.filename === PREGAME, 60_000);
    expect(m.lines.find((l) => l.event === 'remove')).toMatchObject({ reason: 'not-listed', kept: false });
    const got = await mirrored(dir, FILES);
    expect(got[PREGAME]).toBeUndefined();
    // The state follows the folder (written just after it).
    const names = async () => Object.keys((JSON.parse(await readFile(join(dir, '.oddsfiles-mirror.json'), 'utf8')) as { files: object }).files).sort();
    await waitFor(async () => (await names()).length === 2, 10_000, 'the state without the removed file');
    expect(await names()).toEqual([LIVE2, LIVE].sort());
    expect((await mirrored(kept, FILES))[PREGAME]?.equals(last[PREGAME]!)).toBe(true);
    // Still following what it may read.
    await publish(LIVE);
    await holds(dir, [LIVE, LIVE2]);
    await m.kill();
    await k.kill();
  }, 180_000);

  it('stops with exit 1 for an unknown key and for a key revoked while it runs', async () => {
    const unknown = mirror(['--url', url, join(dataDir, 'unknown')], 'odf_' + 'x'.repeat(43));
    expect(await unknown.exited).toBe(1);
    expect(unknown.stderr()).toMatch(/the key was refused \(401\)/);
    // The folder it made for nothing is gone.
    await expect(readdir(join(dataDir, 'unknown'))).rejects.toMatchObject({ code: 'ENOENT' });

    const dir = join(dataDir, 'revoked');
    const m = mirror(['--url', url, dir], keys.doomed!);
    await holds(dir, FILES);
    expect((await runCli(env, ['keys', 'revoke', 'doomed'])).code).toBe(0);
    expect(await m.exited).toBe(1);
    expect(m.stderr()).toMatch(/revoked/);
  });

  it('waits out 429 and 503 for their Retry-After, and stops on 403', async () => {
    // A plan of 2 requests per 2 s: the catalog and three files take two windows.
    const dir = join(dataDir, 'tight');
    const t = mirror(['--url', url, '--once', dir], keys.tight!);
    expect(await t.exited).toBe(0);
    expect(t.stderr()).toMatch(/: 429 .*retrying in/);
    await holds(dir, FILES);

    const proxy = await startProxy(url);
    try {
      proxy.answer(503, 2, '1');
      const dir2 = join(dataDir, 'unavailable');
      const u = mirror(['--url', proxy.url, '--once', dir2], keys.all!);
      expect(await u.exited).toBe(0);
      expect(proxy.injected).toBe(2);
      expect(u.stderr().match(/: 503 injected 503; retrying in [1-9]/g)).toHaveLength(2);
      await holds(dir2, FILES);

      proxy.answer(403, 1);
      const f = mirror(['--url', proxy.url, join(dataDir, 'forbidden')], keys.all!);
      expect(await f.exited).toBe(1);
      expect(f.stderr()).toMatch(/no access to this service \(403\): injected 403/);
    } finally {
      await proxy.stop();
    }
  });

  it('says what is wrong with a URL: malformed (2), nothing listening (1), not the service (2); and a missing key (2)', async () => {
    const bad = mirror(['--url', 'odds.example.com', join(dataDir, 'bad')], keys.all!);
    expect(await bad.exited).toBe(2);
    expect(bad.stderr()).toMatch(/not a URL/);
    const closed = mirror(['--url', `http://127.0.0.1:${await freePort()}`, join(dataDir, 'closed')], keys.all!);
    expect(await closed.exited).toBe(1);
    expect(closed.stderr()).toMatch(/cannot reach http:\/\/127\.0\.0\.1:\d+/);
    const wrong = mirror(['--url', `${url}/not/here/`, join(dataDir, 'wrong')], keys.all!);
    expect(await wrong.exited).toBe(2);
    expect(wrong.stderr()).toMatch(/is not an oddsfiles service/);
    const nokey = startMirror(['--url', url, join(dataDir, 'nokey')], { PATH: process.env.PATH ?? '' });
    mirrors.push(nokey);
    expect(await nokey.exited).toBe(2);
    expect(nokey.stderr()).toMatch(/give the key with --key or in ODDSFILES_KEY/);
  });

  it('reports a folder it cannot write and retries until it can; --once gives up with exit 1', async () => {
    // A path under a regular file cannot be a folder for anyone, root included.
    const blocker = join(dataDir, 'blocker');
    await writeFile(blocker, 'in the way');
    const gaveUp = mirror(['--url', url, '--once', join(blocker, 'dir')], keys.all!);
    expect(await gaveUp.exited).toBe(1);
    expect(gaveUp.stderr()).toMatch(/cannot write .*blocker\/dir .*retrying in/);
    expect(gaveUp.stderr()).toMatch(/gave up after \d+ s/);

    const dir = join(blocker, 'dir');
    const m = mirror(['--url', url, '--json', dir], keys.all!);
    await m.waitForStderr(/cannot write .*blocker\/dir .*retrying in/);
    await rm(blocker);
    await holds(dir, FILES);

    // A file it cannot replace (a folder in its place), then again writable.
    await rm(join(dir, LIVE));
    await mkdir(join(dir, LIVE, 'x'), { recursive: true });
    await publish(LIVE);
    await m.waitForStderr(new RegExp(`cannot write .*writing ${LIVE}.*retrying in`));
    await rm(join(dir, LIVE), { recursive: true });
    await holds(dir, FILES);

    // A read-only folder (permissions bind only a user other than root).
    if (process.getuid?.() !== 0) {
      await chmod(dir, 0o555);
      await publish(LIVE2);
      await m.waitForStderr(new RegExp(`cannot write .*writing ${LIVE2}.*retrying in`));
      await chmod(dir, 0o755);
      await holds(dir, FILES);
    }
    await m.kill();
  }, 120_000);
});
