/**
 * Signals over the real command: the first SIGTERM drains, a second one while draining (more than
 * a second after the first) exits at once with status 1 and says so (docs/operations.md,
 * "Stopping"); Ctrl-C on `npm start` (SIGINT to the whole process group, which reaches the service
 * twice) drains once and exits 0; a stop answers the long-polls it holds at once; and `npm start` stopped by a SIGTERM to npm stops the service with it (its script execs the command, and npm passes the
 * signal on), leaving no process behind and the port free.
 */
import { once } from 'node:events';
import { connect, createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, ROOT, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';
import { createApiKey, freePort } from '../../helpers/faults.js';
import { spawnTracked } from '../../helpers/processes.js';

describe('oddsfiles start: signals', () => {
  const prefix = uniquePrefix('e2e-signals');
  let svc: RunningOddsfiles;

  beforeAll(async () => {
    svc = await startOddsfiles(baseEnv(await makeDataDir('e2e-signals'), prefix), ['start', '--roles', 'reader']);
  });

  afterAll(async () => {
    await svc?.kill();
    await dropPrefix(prefix);
  });

  it('a second SIGTERM while draining exits 1 at once, with its log line', async () => {
    const { hostname, port } = new URL(svc.url!);
    const socket = connect(Number(port), hostname);
    await once(socket, 'connect');
    // A request whose headers never end: the reader's close waits for it (up to the headers timeout, 10 s).
    socket.write('GET /v1/files HTTP/1.1\r\nHost: oddsfiles\r\n');
    socket.on('error', () => undefined);
    await sleep(100);
    const closed = once(svc.proc, 'close') as Promise<[number | null, NodeJS.Signals | null]>;
    svc.proc.kill('SIGTERM');
    await svc.waitForLog((l) => l.msg === 'stopping: draining in-flight work');
    // A signal within a second of the first is the same one (one Ctrl-C reaches it twice under
    // npm): a second signal is one that comes later.
    await sleep(1300);
    expect(svc.proc.exitCode, 'still draining when the second signal comes').toBe(null);
    svc.proc.kill('SIGTERM');
    const [code, signal] = await closed;
    socket.destroy();
    expect({ code, signal }).toEqual({ code: 1, signal: null });
    expect(svc.logs.some((l) => l.msg === 'second signal: exiting now')).toBe(true);
  });
});

describe('oddsfiles start: stopping with long-polls held', () => {
  const prefix = uniquePrefix('e2e-signals-poll');
  let svc: RunningOddsfiles | undefined;

  afterAll(async () => {
    await svc?.kill();
    await dropPrefix(prefix);
  });

  it('answers a held long-poll with what there is, and does not wait out its wait', async () => {
    const env = baseEnv(await makeDataDir('e2e-signals-poll'), prefix);
    svc = await startOddsfiles(env, ['start', '--roles', 'reader']);
    const key = await createApiKey(env);
    const url = `${svc.url!}/v1/changes?wait=30`;
    await waitFor(async () => (await fetch(`${svc!.url!}/v1/changes`, { headers: { 'x-api-key': key } })).status === 200);
    const held = fetch(url, { headers: { 'x-api-key': key } }).then(
      async (r) => ({ status: r.status, body: await r.text() }),
      (err: unknown) => ({ status: 0, body: String(err) }),
    );
    // Held: the reader counts it as waiting.
    await waitFor(async () => /^oddsfiles_longpolls_waiting(?:\{[^}]*\})? 1$/m.test(await (await fetch(`${svc!.url!}/metrics`)).text()));
    const closed = once(svc.proc, 'close') as Promise<[number | null, NodeJS.Signals | null]>;
    svc.proc.kill('SIGTERM');
    const answer = await held;
    // Before: the stop waited for the long-poll until a step's deadline, then cut it (no answer).
    expect(answer.status, answer.body).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ changes: [] });
    expect((await closed)[0]).toBe(0);
    expect(svc.logs.filter((l) => /did not finish in time/.test(String(l.msg)))).toEqual([]);
  });
});

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('npm start', () => {
  const prefix = uniquePrefix('e2e-npm-start');
  let servicePid: number | undefined;

  afterAll(async () => {
    if (servicePid !== undefined && alive(servicePid)) process.kill(servicePid, 'SIGKILL');
    await dropPrefix(prefix);
  });

  it('Ctrl-C (SIGINT to the whole process group: npm and the service, npm passing its own on) drains once and exits 0', async () => {
    const port = await freePort();
    const env = baseEnv(await makeDataDir('e2e-npm-ctrl-c'), prefix, { PORT: String(port) });
    // npm leads a process group of its own, as a terminal's foreground job does.
    const npm = spawnTracked('npm', ['start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    npm.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    npm.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
    const exited = once(npm, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    const lines = () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg?: string; pid?: number; signal?: string });
    const started = await waitFor(() => lines().find((l) => l.msg === 'oddsfiles started'), 30_000, 'the service started under npm');
    servicePid = started.pid!;
    // What the terminal does on Ctrl-C: one SIGINT to every process of the foreground group.
    process.kill(-npm.pid!, 'SIGINT');
    const [code, signal] = await exited;
    await waitFor(() => !alive(servicePid!), 15_000, 'the service process gone');
    expect({ code, signal }, out.slice(-2000)).toEqual({ code: 0, signal: null });
    expect(lines().filter((l) => l.msg === 'stopping: draining in-flight work')).toHaveLength(1);
    expect(lines().some((l) => l.msg === 'stopped')).toBe(true);
    expect(out).not.toContain('second signal');
    expect(await portFree(port)).toBe(true);
  }, 60_000);

  it('a SIGTERM to npm stops the service: no process left, the port free', async () => {
    const port = await freePort();
    const env = baseEnv(await makeDataDir('e2e-npm-start'), prefix, { PORT: String(port) });
    const npm = spawnTracked('npm', ['start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    npm.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    npm.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
    const exited = once(npm, 'exit');
    const started = await waitFor(
      () =>
        out
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { msg?: string; pid?: number })
          .find((l) => l.msg === 'oddsfiles started'),
      30_000,
      'the service started under npm',
    );
    servicePid = started.pid!;
    expect(servicePid).not.toBe(npm.pid);
    expect(await portFree(port)).toBe(false);

    npm.kill('SIGTERM');
    await exited;
    await waitFor(() => !alive(servicePid!), 15_000, 'the service process gone');
    expect(await portFree(port)).toBe(true);
    expect(out).toContain('"msg":"stopped"');
  }, 60_000);
});
