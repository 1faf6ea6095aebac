/**
 * The size goal and the CPU cost of a JSON Patch delta in the stall bench: a client one version
 * behind gets a patch (226); how its size compares with the gzip whole file, and how the reader's
 * CPU per answer of that patch compares with its 304 to a client that is up to date.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { cpuMs } from '../common/proc.js';
import type { Get, Inbox } from './client.js';

export interface CostOptions {
  /** The reader's base URL, its process and a key that reads every file. */
  readonly url: string;
  readonly pid: number;
  readonly key: string;
  readonly get: Get;
  readonly inbox: Inbox;
  /** The live file, and its next version each call. */
  readonly name: string;
  readonly next: () => Buffer;
  /** Requests per kind in each of the two rounds. */
  readonly requests: number;
}

export interface PatchCost {
  /** The size of the newest version, bytes. */
  readonly liveBytes: number;
  /** The gzip patch from the version before, and the gzip whole file, bytes. */
  readonly patch: number;
  readonly wholeGzip: number;
  /** The reader's CPU per answer, ms, summed over the two rounds. */
  readonly cpu: { readonly patch: number; readonly notModified: number };
}

/** Two versions published; the patch between them measured, then two rounds of 304s and patches. */
export async function patchCost(o: CostOptions): Promise<PatchCost> {
  const v1 = o.next();
  await o.inbox.drop(o.name, v1);
  const e1 = await o.inbox.served(o.name, v1);
  const v2 = o.next();
  await o.inbox.drop(o.name, v2);
  const e2 = await o.inbox.served(o.name, v2);
  const ask = (etag: string) =>
    o.get(`${o.url}/v1/data/${o.name}`, { 'x-api-key': o.key, 'a-im': 'json-patch', 'if-none-match': etag, 'accept-encoding': 'gzip' });
  let patch = 0;
  for (let i = 0; i < 50 && patch === 0; i++) {
    const res = await ask(e1);
    if (res.status === 226 && res.headers['content-encoding'] === 'gzip') patch = res.length;
    else await sleep(100);
  }
  // No patch in 5 s: the size goal cannot be judged, and the CPU rounds below would fail anyway.
  if (patch === 0) throw new Error(`no gzip JSON Patch (226) for ${o.name} one version behind in 50 tries: is deltas on?`);
  const wholeGzip = (await o.get(`${o.url}/v1/data/${o.name}`, { 'x-api-key': o.key, 'accept-encoding': 'gzip' })).length;
  const cpuOf = async (etag: string, expect: number) => {
    const before = cpuMs(o.pid);
    for (let i = 0; i < o.requests; i++) {
      const res = await ask(etag);
      if (res.status !== expect) throw new Error(`expected ${expect}, got ${res.status}`);
    }
    return (cpuMs(o.pid) - before) / o.requests;
  };
  const cpu = { patch: 0, notModified: 0 };
  for (let r = 0; r < 2; r++) {
    cpu.notModified += await cpuOf(e2, 304);
    cpu.patch += await cpuOf(e1, 226);
  }
  return { liveBytes: v2.length, patch, wholeGzip, cpu };
}
