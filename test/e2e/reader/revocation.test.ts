/**
 * Revocation ends what a key already started, end to end (`oddsfiles start`, keys revoked with the
 * CLI): a long-poll held on /v1/changes answers 401 instead of the change published after the
 * revocation; an upload whose headers arrived before the revocation and whose body after it is
 * answered 401 and published nowhere, staged nowhere, queued nowhere.
 */
import { connect, type Socket } from 'node:net';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drop, tinyDoc } from '../../helpers/drops.js';
import { catalogSeq, readCatalog } from '../../helpers/published.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const LIVE = 'site_live_northwind_soccer.json';
const PREGAME = 'site_pregame_northwind_soccer.json';

describe('revocation ends held long-polls and uploads not yet queued', () => {
  const prefix = uniquePrefix('e2e-revoke');
  let dataDir: string;
  let env: Record<string, string>;
  let svc: RunningOddsfiles;
  const sockets: Socket[] = [];

  const make = async (name: string, args: string[]) => {
    const res = await runCli(env, ['keys', 'create', '--name', name, ...args]);
    expect(res.code, res.stderr).toBe(0);
    const key = res.stdout.trim();
    await waitFor(async () => (await fetch(`${svc.url}/v1/files`, { headers: { 'x-api-key': key } })).status === 200, 10_000, `key ${name} known`);
    return key;
  };
  /** Revoke with the CLI, then wait until the reader refuses the key. */
  const revoke = async (name: string, key: string) => {
    const res = await runCli(env, ['keys', 'revoke', name]);
    expect(res.code, res.stderr).toBe(0);
    await waitFor(async () => (await fetch(`${svc.url}/v1/files`, { headers: { 'x-api-key': key } })).status === 401, 10_000, `key ${name} refused`);
  };

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-revoke');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), 'plans:\n  pro: { allow: ["*"] }\npublish: { rate: { max: 100000, per: 1m }, uploads_per_key: 1 }\n');
    env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
  }, 60_000);

  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it('a held long-poll answers 401 at the revocation and never gets the change published after it', async () => {
    const key = await make('poller', ['--plan', 'pro']);
    const catalog = (await (await fetch(`${svc.url}/v1/catalog`, { headers: { 'x-api-key': key } })).json()) as { position: number };
    const held = fetch(`${svc.url}/v1/changes?since=${catalog.position}&wait=60`, { headers: { 'x-api-key': key } });
    // Held: a long-poll waiting shows in `status`.
    await waitFor(
      async () => {
        const s = await runCli(env, ['status', '--json']);
        return (JSON.parse(s.stdout) as { changes: { waiting: number } }).changes.waiting === 1;
      },
      20_000,
      'the long-poll held',
      200,
    );
    await revoke('poller', key);
    // A change it would have been woken by, published after the revocation.
    const seq = await catalogSeq(prefix);
    await drop(join(dataDir, 'inbox'), LIVE, tinyDoc('northwind', 'soccer', new Date().toISOString()));
    await waitFor(async () => (await catalogSeq(prefix)) > seq, 20_000, 'the change published');
    const res = await held;
    const body = (await res.json()) as { type?: string; detail?: string; changes?: unknown[] };
    expect(res.status, JSON.stringify(body)).toBe(401);
    expect(body.type).toBe('https://oddsfiles.dev/problems/unauthorized');
    expect(body.detail).toMatch(/revoked/);
    expect(body.changes).toBeUndefined();
  }, 60_000);

  it('an upload whose body arrives after the revocation is answered 401, and nothing is published, staged or queued', async () => {
    const key = await make('uploader', ['--plan', 'pro', '--publish', 'site_*_northwind*']);
    const port = Number(new URL(svc.url!).port);
    const seq = await catalogSeq(prefix);
    const doc = tinyDoc('northwind', 'soccer', new Date().toISOString());
    const half = Math.floor(doc.length / 2);
    // On a socket of its own, byte for byte: the headers and half the body now, the rest later.
    const startUpload = async () => {
      const socket = connect(port, '127.0.0.1');
      await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      let raw = '';
      socket.setEncoding('utf8').on('data', (c: string) => (raw += c));
      const answered = new Promise<{ status: number; body: string }>((resolve) => {
        const done = () => {
          const split = raw.indexOf('\r\n\r\n');
          resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0), body: split < 0 ? raw : raw.slice(split + 4) });
        };
        socket.once('end', done).once('close', done);
      });
      socket.write(
        `PUT /v1/data/${PREGAME} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: ${doc.length}\r\nConnection: close\r\n\r\n`,
      );
      // The headers and half the body before the revocation, the rest after it.
      socket.write(doc.subarray(0, half));
      return { socket, answered, refused: () => raw !== '' };
    };
    let upload = await startUpload();
    sockets.push(upload.socket);
    // The upload is under way once it holds the key's one upload slot: a dry run of the same key
    // (which publishes nothing) is then refused with 429 too-many-uploads. A probe that reached
    // the reader first holds the slot for its moment, and the upload is refused instead: then it
    // starts again. The last probe's answer goes into a failure, to tell a slow start from another refusal.
    let lastProbe = 'none yet';
    await waitFor(
      async () => {
        if (upload.refused()) {
          upload.socket.destroy();
          upload = await startUpload();
          sockets.push(upload.socket);
        }
        const probe = await fetch(`${svc.url}/v1/data/${PREGAME}?dry_run=1`, { method: 'PUT', headers: { 'x-api-key': key }, body: doc });
        lastProbe = `${probe.status} ${(await probe.text()).slice(0, 200)}`;
        return probe.status === 429 && !upload.refused();
      },
      30_000,
      'the upload under way',
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}; the last probe: ${lastProbe}`);
    });
    await revoke('uploader', key);
    upload.socket.write(doc.subarray(half));
    const answer = await upload.answered;
    expect(answer.status, answer.body).toBe(401);
    expect(JSON.parse(answer.body)).toMatchObject({ type: 'https://oddsfiles.dev/problems/unauthorized', detail: expect.stringMatching(/revoked/) });
    // Nothing published: the catalog has no such file and its position did not move for it.
    expect((await readCatalog(prefix)).has(PREGAME)).toBe(false);
    expect(await catalogSeq(prefix)).toBe(seq);
    // Nothing left staged, and no job for it.
    expect((await readdir(join(dataDir, 'store', 'incoming')).catch(() => [] as string[])).filter((n) => !n.startsWith('.'))).toEqual([]);
    const status = JSON.parse((await runCli(env, ['status', '--json'])).stdout) as { queue: Record<string, number> };
    expect(status.queue.waiting ?? 0).toBe(0);
    expect(status.queue.active ?? 0).toBe(0);
  }, 60_000);
});
