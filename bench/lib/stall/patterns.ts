/**
 * The hostile patterns of the stall bench, one function each: it runs the pattern for the time
 * asked and returns its outcome, the last column of the report's table. The bench measures the
 * reader meanwhile (meter.ts); the patterns only load it.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { version, type DocTemplate } from '../common/drops.js';
import { loopCpuMs } from '../common/proc.js';
import { log } from '../common/run.js';
import type { Get, Inbox } from './client.js';
import { measureFloor, type Floor } from './floor.js';

const counted = (counts: Iterable<[string | number, number]>) => [...counts].map(([s, n]) => `${n}× ${s}`).join(', ');

export interface DeltaOptions {
  /** The reader's base URL, its process and a key that reads every file. */
  readonly url: string;
  readonly pid: number;
  readonly key: string;
  /** The file, and the ETags of its older versions the clients ask a patch from, in rotation. */
  readonly name: string;
  readonly etags: readonly string[];
  readonly seconds: number;
}

/** (a) 4 clients asking JSON Patch deltas from older bases in rotation: their answers, and the reader's loop CPU per answer. */
export async function deltaClients(o: DeltaOptions): Promise<string> {
  // In a process of their own: in this one their answers would delay the steady client's.
  const child = spawn(process.execPath, [
    resolve('bench/lib/stall/delta-clients-child.mjs'),
    JSON.stringify({ url: o.url, key: o.key, name: o.name, etags: o.etags, clients: 4, seconds: o.seconds }),
  ]);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const cpuBefore = loopCpuMs(o.pid);
  await once(child, 'exit');
  const cpu = loopCpuMs(o.pid) - cpuBefore;
  const counts = Object.entries(JSON.parse(out) as Record<string, number>);
  const answers = counts.reduce((a, [, n]) => a + n, 0);
  return `${counted(counts)}; reader loop CPU ${(cpu / answers).toFixed(3)} ms per answer`;
}

/** The floor of (a): the same clients against a bare server answering the sizes the reader answered with (floor.ts). */
export async function deltaFloor(o: { url: string; key: string; name: string; etag: string; seconds: number; get: Get }): Promise<Floor> {
  const patchBytes = (
    await o.get(`${o.url}/v1/data/${o.name}`, { 'x-api-key': o.key, 'a-im': 'json-patch', 'if-none-match': o.etag, 'accept-encoding': 'gzip' })
  ).length;
  const filesBytes = (await o.get(`${o.url}/v1/files`, { 'x-api-key': o.key })).length;
  const floor = await measureFloor({ seconds: o.seconds, patchBytes, filesBytes, get: o.get });
  log(
    `(a) floor: a bare node:http server, steady p99 idle ${floor.idleP99.toFixed(1)} ms, under the 4 delta clients ${floor.loadedP99.toFixed(1)} ms (${JSON.stringify(floor.counts)})`,
  );
  return floor;
}

/** (b) One big version dropped: how long until it is served; the pattern lasts at least half of `seconds`. */
export async function bigVersion(o: { inbox: Inbox; name: string; bytes: Buffer; seconds: number }): Promise<string> {
  const t = performance.now();
  await o.inbox.drop(o.name, o.bytes);
  await o.inbox.served(o.name, o.bytes);
  const took = performance.now() - t;
  await sleep(Math.max(0, o.seconds * 500 - took));
  return `drop → served in ${(took / 1000).toFixed(1)} s`;
}

/**
 * (c) 100 drops a second, the templates in turn, each with a new generated_at (common/drops.ts): no JSON
 * work in this process.
 */
export async function dropStorm(o: { inbox: Inbox; templates: readonly DocTemplate[]; seconds: number }): Promise<string> {
  const end = Date.now() + o.seconds * 1000;
  let n = 0;
  const start = Date.now();
  while (Date.now() < end) {
    const t = o.templates[n % o.templates.length]!;
    await o.inbox.drop(t.feed.filename, version(t).bytes);
    n++;
    const ahead = start + n * 10 - Date.now();
    if (ahead > 0) await sleep(ahead);
  }
  return `${n} drops in ${((Date.now() - start) / 1000).toFixed(0)} s`;
}

export interface StalledOptions {
  readonly url: string;
  /** The key of the 20 uploads that send a few bytes and then nothing, and the file they upload. */
  readonly stalledKey: string;
  readonly stalledName: string;
  /** The other key, and the file it PUTs every 100 ms meanwhile. */
  readonly otherKey: string;
  readonly other: { readonly name: string; readonly next: () => Buffer };
  readonly seconds: number;
}

/** (d) 20 stalled uploads of one key while another key publishes: how many stalled ones were refused, what the other key got. */
export async function stalledUploads(o: StalledOptions): Promise<string> {
  const u = new URL(o.url);
  const sockets: Socket[] = [];
  const refused = { stalled: 0 };
  for (let i = 0; i < 20; i++) {
    const s = connect(Number(u.port), u.hostname);
    s.on('data', (d) => {
      if (d.toString().startsWith('HTTP/1.1 429')) refused.stalled++;
    });
    s.on('error', () => undefined);
    s.write(`PUT /v1/data/${o.stalledName} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${o.stalledKey}\r\nContent-Length: 200000\r\n\r\n{"events":[`);
    sockets.push(s);
  }
  const outcomes = new Map<number, number>();
  const end = Date.now() + o.seconds * 1000;
  while (Date.now() < end) {
    const res = await fetch(`${o.url}/v1/data/${o.other.name}`, { method: 'PUT', headers: { 'x-api-key': o.otherKey }, body: o.other.next() });
    await res.arrayBuffer();
    outcomes.set(res.status, (outcomes.get(res.status) ?? 0) + 1);
    await sleep(100);
  }
  for (const s of sockets) s.destroy();
  return `stalled key: ${refused.stalled} of 20 refused 429; other key: ${counted(outcomes)}`;
}
