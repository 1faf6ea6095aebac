/**
 * The measured steps the benches share: a drop polled until served (freshness), a round of drops
 * until settled (throughput), the reference loop they are compared with, and publishing the
 * example registry for the reader benches.
 */
import { mkdir, open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { EXAMPLE_FEEDS } from '../../../test/fixtures/corpus.js';
import { TEST_REDIS_URL } from '../../../test/helpers/redis.js';
import type { BareSystem } from '../bare/system.js';
import { docTemplate, stage, version, versions, type DocTemplate } from './drops.js';
import type { OddsfilesSystem } from './oddsfiles-system.js';
import type { Poller } from './poller.js';
import { cpuMsOf, quiesce } from './proc.js';
import { nowMs } from './stats.js';

export type System = OddsfilesSystem | BareSystem;

/** filename → sha256 of what the catalog holds. */
export async function catalogShas(redis: Redis, key: string): Promise<Map<string, string>> {
  const flat = await redis.hgetall(key);
  return new Map(Object.entries(flat).map(([name, json]) => [name, (JSON.parse(json) as { sha256: string }).sha256]));
}

/**
 * Settled: inbox and .processing empty, and the catalog holds every one of `wanted`. Polled every
 * `pollMs`; false after `timeoutMs`.
 */
export async function waitSettled(
  sys: System,
  redis: Redis,
  wanted: readonly { name: string; sha256: string }[],
  timeoutMs: number,
  pollMs = 5,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await sys.drained()) {
      const shas = await catalogShas(redis, sys.catalogKey);
      if (wanted.every((x) => shas.get(x.name) === x.sha256)) return true;
    }
    if (Date.now() > deadline) return false;
    await sleep(pollMs);
  }
}

/** Until the system's inbox and .processing are empty; false after timeoutMs. */
export async function waitDrained(sys: System, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await sys.drained()) return true;
    await sleep(25);
  }
  return false;
}

export interface DropResult {
  /** Rename → served, ms (Infinity when never served in time). */
  readonly fresh: number;
  readonly t0: number;
  readonly served: number;
  readonly polls: number;
  readonly etag: string;
  readonly sha256: string;
  readonly generatedAt: string;
}

/** A new version's freshness: from `t0` to the first GET that served it (`r`, none: never). */
function resultOf(v: ReturnType<typeof version>, t0: number, r: { at: number; polls: number } | undefined): DropResult {
  return {
    fresh: r ? r.at - t0 : Number.POSITIVE_INFINITY,
    t0,
    served: r?.at ?? Number.NaN,
    polls: r?.polls ?? 0,
    etag: v.etag,
    sha256: v.sha256,
    generatedAt: v.generatedAt,
  };
}

/** Drop a new version of `tmpl` (dot-name, then rename) and poll until it is served. */
export async function dropAndPoll(
  sys: System,
  poller: Poller,
  tmpl: DocTemplate,
  previous: string | undefined,
  timeoutMs = 10_000,
  gapMs = 0,
): Promise<DropResult> {
  const v = version(tmpl);
  const tmp = join(sys.inbox, `.fresh-${process.pid}.tmp`);
  await writeFile(tmp, v.bytes);
  const t0 = nowMs();
  await rename(tmp, join(sys.inbox, tmpl.feed.filename));
  const r = await poller.until(`/v1/data/${tmpl.feed.filename}`, v.etag, previous, timeoutMs, gapMs);
  return resultOf(v, t0, r);
}

/**
 * PUT a new version of `tmpl` to the system's reader and poll (on the poller's own socket, from
 * the moment the PUT starts) until a GET serves it: PUT → first GET serving the new version.
 */
export async function putAndPoll(
  sys: OddsfilesSystem,
  poller: Poller,
  tmpl: DocTemplate,
  previous: string | undefined,
  timeoutMs = 10_000,
  gapMs = 0,
): Promise<DropResult> {
  const v = version(tmpl);
  const path = `/v1/data/${tmpl.feed.filename}`;
  const t0 = nowMs();
  const put = fetch(`${sys.readerUrl}${path}`, {
    method: 'PUT',
    headers: { 'x-api-key': sys.publisherKey, 'content-type': 'application/json' },
    body: v.bytes,
  });
  const [r, res] = await Promise.all([poller.until(path, v.etag, previous, timeoutMs, gapMs), put]);
  if (res.status !== 201) throw new Error(`PUT ${path}: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
  return resultOf(v, t0, r);
}

export interface Round {
  readonly seconds: number;
  /** CPU of the system's processes for the round, until they are idle again. */
  readonly cpuMs: number;
  readonly settled: boolean;
}

/**
 * One ingest round: a new version of every template renamed into the inbox at once (written
 * first, once `quiet()` is idle); timed until settled. Its CPU is read once the processes are idle
 * again, so compression and manifest writes are counted.
 */
export async function ingestRound(sys: System, templates: readonly DocTemplate[], redis: Redis, quiet: () => number[], timeoutMs = 120_000): Promise<Round> {
  const vs = versions(templates);
  const staged = await stage(sys.inbox, vs);
  await quiesce(quiet());
  const cpu0 = cpuMsOf(sys.pids());
  const t0 = nowMs();
  for (const s of staged) await rename(s.tmp, s.final);
  const settled = await waitSettled(sys, redis, vs, timeoutMs, templates.length > 500 ? 50 : 5);
  const seconds = (nowMs() - t0) / 1000;
  await quiesce(quiet(), { maxMs: 30_000 });
  return { seconds, cpuMs: cpuMsOf(sys.pids()) - cpu0, settled };
}

/**
 * The loop ingest throughput is compared with: for each file, read it, JSON.parse it, write it to
 * a temp file, fsync, rename into place (one file at a time). Its ms. `durable`: each file is
 * renamed into a folder of its own (as the store keeps each feed's versions) and that folder is
 * fsynced after the rename, which a publication needs to survive a crash and the loop leaves out.
 */
export async function referenceLoop(files: readonly string[], outDir: string, durable = false): Promise<number> {
  await mkdir(outDir, { recursive: true });
  const dirs = durable ? files.map((_, i) => join(outDir, `f${i}`)) : [];
  for (const d of dirs) await mkdir(d, { recursive: true });
  const t0 = nowMs();
  let i = 0;
  for (const f of files) {
    const bytes = await readFile(f);
    JSON.parse(bytes.toString('utf8'));
    const dir = durable ? dirs[i]! : outDir;
    const tmp = join(outDir, `.${i++}.tmp`);
    const fh = await open(tmp, 'w');
    try {
      await fh.writeFile(bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, join(dir, `${i}.json`));
    if (durable) {
      const dh = await open(dir, 'r');
      try {
        await dh.sync();
      } finally {
        await dh.close();
      }
    }
  }
  return nowMs() - t0;
}

/** The reference loop over new versions of the templates (staged in `dir` first, removed after). */
export async function referenceRound(dir: string, templates: readonly DocTemplate[], quiet: () => number[], durable = false): Promise<Omit<Round, 'settled'>> {
  await mkdir(dir, { recursive: true });
  const staged = await stage(dir, versions(templates));
  await quiesce(quiet());
  const c0 = process.cpuUsage();
  const ms = await referenceLoop(
    staged.map((s) => s.tmp),
    join(dir, 'out'),
    durable,
  );
  const c = process.cpuUsage(c0);
  await rm(dir, { recursive: true, force: true });
  return { seconds: ms / 1000, cpuMs: (c.user + c.system) / 1000 };
}

/**
 * The example registry as the reader benches publish it: `big` at 200 KB, every other feed about
 * 4 KB; renamed into the inbox at once, resolved once the catalog holds every version.
 */
export async function publishExampleSet(sys: OddsfilesSystem, big: string): Promise<{ name: string; bytes: Buffer; sha256: string }[]> {
  const redis = new Redis(TEST_REDIS_URL);
  try {
    const vs = versions(EXAMPLE_FEEDS.map((f) => docTemplate(f, f.filename === big ? 200 * 1024 : 4000)));
    for (const s of await stage(sys.inbox, vs)) await rename(s.tmp, s.final);
    if (!(await waitSettled(sys, redis, vs, 120_000, 20))) throw new Error('the example registry was not published within 120 s');
    return vs;
  } finally {
    redis.disconnect();
  }
}
