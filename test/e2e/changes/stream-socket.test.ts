/**
 * What a stream's client does with its connection, against `oddsfiles start`: a client that
 * half-closes has its stream ended and released; bytes sent after the request are dropped and the
 * stream goes on (no second answer on the connection); 2,000 streams opened and closed leave no
 * stream, slot or socket held.
 */
import { readdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drop } from '../../helpers/drops.js';
import { docFor, sleep } from '../../helpers/faults.js';
import { openRawStream, type RawStream } from '../../helpers/raw-stream.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, type RunningOddsfiles } from '../../helpers/service.js';

const A = 'site_live_northwind_soccer.json';
const HEAD = /^HTTP\/1\.1 200[^]*?\r\n\r\nretry: \d+\n\n/;

describe('a stream and its connection', () => {
  const prefix = uniquePrefix('e2e-stream-socket');
  let dataDir: string;
  let svc: RunningOddsfiles;
  let key: string;
  let port: number;
  let redis: Redis;
  const opened: RawStream[] = [];
  let clock = Date.now() - 3_600_000;

  const open = (query = '') => {
    const s = openRawStream(port, key, query);
    opened.push(s);
    return s;
  };
  const publish = async () => {
    clock += 1000;
    await drop(join(dataDir, 'inbox'), A, docFor({ filename: A, bookmaker: 'northwind', sport: 'soccer' }, clock));
  };
  const openStreams = async () => Number(/^oddsfiles_streams_open(?:\{[^}]*\})? (\d+)$/m.exec(await (await fetch(`${svc.url}/metrics`)).text())?.[1] ?? -1);
  /** Sockets and other descriptors the service process holds. */
  const descriptors = () => readdirSync(`/proc/${svc.proc.pid}/fd`).length;
  const slotsHeld = async () => {
    let n = 0;
    for (const k of await redis.keys(`${prefix}:streams:*`)) n += await redis.zcard(k);
    return n;
  };

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-stream-socket');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), ['plans:', '  pro: { allow: ["*"], rate: { max: 1000000, per: 1m }, streams: 1000 }', ''].join('\n'));
    const env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    port = Number(new URL(svc.url!).port);
    key = (await runCli(env, ['keys', 'create', '--name', 'pro', '--plan', 'pro'])).stdout.trim();
    redis = new Redis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379');
  }, 60_000);

  afterAll(async () => {
    for (const s of opened) s.socket.destroy();
    await svc?.stop();
    redis?.disconnect();
    await dropPrefix(prefix);
  });

  it('ends and releases the stream of a client that half-closes', async () => {
    const s = open();
    await s.until(HEAD);
    expect(await openStreams()).toBe(1);
    s.socket.end();
    // The server ends its side too, and holds nothing of the stream.
    await s.ended;
    await expect.poll(openStreams, { timeout: 5000 }).toBe(0);
    await expect.poll(slotsHeld, { timeout: 5000 }).toBe(0);
  });

  it('drops bytes a client sends after its request, and the stream goes on', async () => {
    const s = open();
    await s.until(HEAD);
    // A pipelined request, then bytes that are no HTTP at all.
    s.socket.write('GET /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    s.socket.write(Buffer.from([0, 1, 2, 255, 13, 10, 13, 10]));
    s.socket.write('x'.repeat(64 * 1024));
    await publish();
    await s.until(/event: change\ndata: \{[^\n]*"filename":"site_live_northwind_soccer\.json"/);
    await sleep(300);
    expect(s.text().match(/HTTP\/1\.1 /g)).toHaveLength(1);
    expect(s.socket.destroyed).toBe(false);
    expect(await openStreams()).toBe(1);
    s.socket.destroy();
    await expect.poll(openStreams, { timeout: 5000 }).toBe(0);
  });

  it('keeps nothing of 2,000 streams opened and closed', async () => {
    const before = descriptors();
    const rounds = 10;
    const perRound = 200;
    for (let r = 0; r < rounds; r++) {
      const batch = Array.from({ length: perRound }, () => openRawStream(port, key));
      await Promise.all(batch.map((s) => s.until(HEAD, 30_000)));
      // Closed in the ways clients close: at once, a half-close, and a half-close before the answer.
      batch.forEach((s, i) => (i % 2 === 0 ? s.socket.destroy() : s.socket.end()));
      await Promise.all(batch.map((s) => s.ended));
    }
    await expect.poll(openStreams, { timeout: 10_000 }).toBe(0);
    await expect.poll(slotsHeld, { timeout: 10_000 }).toBe(0);
    await expect.poll(descriptors, { timeout: 10_000 }).toBeLessThanOrEqual(before + 5);
    // And it still serves streams.
    const s = open();
    await s.until(HEAD);
    s.socket.destroy();
  }, 120_000);
});
