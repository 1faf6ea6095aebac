/**
 * Signals over the real command: the first SIGTERM drains, a second one while draining exits at
 * once with status 1 and says so (docs/operations.md, "Stopping").
 */
import { once } from 'node:events';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropPrefix, uniquePrefix } from './helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, type RunningOddsfiles } from './helpers/service.js';

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
    await sleep(300);
    expect(svc.proc.exitCode, 'still draining when the second signal comes').toBe(null);
    svc.proc.kill('SIGTERM');
    const [code, signal] = await closed;
    socket.destroy();
    expect({ code, signal }).toEqual({ code: 1, signal: null });
    expect(svc.logs.some((l) => l.msg === 'second signal: exiting now')).toBe(true);
  });
});
