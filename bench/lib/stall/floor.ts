/**
 * The floor of bench/stall.ts (a): the same steady client and the same four delta clients against
 * a bare node:http server (bench/lib/bare/delta-server.mjs) that answers with bytes made in advance, of the
 * sizes the reader sent. What the steady client's p99 becomes there is what the machine itself
 * costs it when four clients ask as fast as answers come (the clients and the server share its cores).
 *
 * And the floor of (a)'s memory: a bare Node process doing only (a)'s builds with the reader's own
 * build step (bench/lib/bare/delta-builds.mjs), on its main thread and in one worker thread.
 */
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawnTracked } from '../../../test/helpers/processes.js';
import { tempDir } from '../common/run.js';
import { quantile } from '../common/stats.js';

export interface FloorOptions {
  readonly seconds: number;
  /** Body sizes of the reader's answers: a patch (226), /v1/files. */
  readonly patchBytes: number;
  readonly filesBytes: number;
  /** The steady client's GET (the bench's own). */
  readonly get: (url: string, headers: Record<string, string>) => Promise<{ status: number }>;
}

export interface Floor {
  readonly idleP99: number;
  readonly loadedP99: number;
  /** Answers the delta clients got, per status. */
  readonly counts: Record<string, number>;
}

export async function measureFloor(o: FloorOptions): Promise<Floor> {
  const server = spawnTracked(
    process.execPath,
    [resolve('bench/lib/bare/delta-server.mjs'), JSON.stringify({ patchBytes: o.patchBytes, filesBytes: o.filesBytes })],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  server.stderr!.resume();
  try {
    const [port] = (await once(createInterface({ input: server.stdout! }), 'line')) as [string];
    const url = `http://127.0.0.1:${port}`;
    const steadyFor = async (ms: number, until?: Promise<unknown>) => {
      const times: number[] = [];
      let done = false;
      void until?.then(() => (done = true));
      for (const end = Date.now() + ms; !done && (until !== undefined || Date.now() < end);) {
        for (const path of ['/v1/files', '/healthz']) {
          const t = performance.now();
          await o.get(`${url}${path}`, {});
          times.push(performance.now() - t);
        }
        await sleep(10);
      }
      return quantile(times, 0.99);
    };
    const idleP99 = await steadyFor(o.seconds * 500);
    const clients = spawnTracked(
      process.execPath,
      [
        resolve('bench/lib/stall/delta-clients-child.mjs'),
        JSON.stringify({ url, key: 'floor', name: 'site_live_northwind_soccer.json', etags: ['"a"', '"b"', '"c"', '"d"'], clients: 4, seconds: o.seconds }),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    clients.stderr!.resume();
    let out = '';
    clients.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const loadedP99 = await steadyFor(0, once(clients, 'exit'));
    return { idleP99, loadedP99, counts: JSON.parse(out) as Record<string, number> };
  } finally {
    server.kill('SIGKILL');
  }
}

export interface BuildFloor {
  /** RSS of the bare process once its modules are loaded, MB. */
  readonly loadedMb: number;
  /** Its peak RSS doing the builds on its main thread, and in one worker thread, MB. */
  readonly mainPeakMb: number;
  readonly threadPeakMb: number;
}

/** The builds of `bases` against `target` in a bare process, with the reader's memory options (`env`). */
export async function measureBuildFloor(target: Buffer, bases: readonly Buffer[], env: Record<string, string>): Promise<BuildFloor> {
  const dir = await tempDir('stall-build-floor');
  await writeFile(join(dir, 'target.json'), target);
  for (const [i, b] of bases.entries()) await writeFile(join(dir, `base-${i}.json`), b);
  const run = async (thread: boolean) => {
    const child = spawnTracked(process.execPath, [resolve('bench/lib/bare/delta-builds.mjs'), JSON.stringify({ dir, bases: bases.length, thread })], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, ...env },
    });
    const exited = once(child, 'exit');
    const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
    await exited;
    return JSON.parse(line) as { loaded: number; peak: number };
  };
  const main = await run(false);
  const thread = await run(true);
  return { loadedMb: main.loaded, mainPeakMb: main.peak, threadPeakMb: thread.peak };
}
