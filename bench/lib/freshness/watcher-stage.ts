/**
 * The watcher stage of freshness alone: rename → event for one watcher at a time, fs.watch as the
 * service uses it against chokidar with and without awaitWriteFinish, on drops claimed (moved
 * out) shortly after they are reported, as the service does.
 */
import { watch as fsWatch } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { watch as chokidarWatch } from 'chokidar';
import { version, type DocTemplate } from '../common/drops.js';
import { tempDir } from '../common/run.js';
import { nowMs } from '../common/stats.js';

export interface WatchPattern {
  /** ms after every watcher saw the drop (or gave up) before it is moved out, as a claim does. */
  readonly claimAfter: readonly [number, number];
  /** ms after the claim before the next drop of the same filename. */
  readonly nextAfter: readonly [number, number];
}

export const WATCHERS = ['chokidar, no awaitWriteFinish', 'chokidar, awaitWriteFinish 50 ms', 'fs.watch (inotify; what the service uses)'] as const;
export type WatcherName = (typeof WATCHERS)[number];

/**
 * rename → event for one watcher, for `n` drops of the same filename, each moved out (claimed)
 * shortly after the watcher reported it, the next one renamed in after a pause. A drop not
 * reported within `missAfterMs` counts as missed (the service's rescan would find it within
 * ingest.rescan, 5 s); it is claimed all the same.
 */
export async function watcherStage(
  which: WatcherName,
  n: number,
  tmpl: DocTemplate,
  pattern: WatchPattern,
  missAfterMs = 300,
): Promise<{ latency: number[]; missed: number }> {
  const dir = await tempDir('watch');
  const away = join(dir, '.away');
  await mkdir(away);
  const name = tmpl.feed.filename;
  let seen: number | undefined;
  const out = { latency: [] as number[], missed: 0 };
  const ignored = (p: string) => p !== dir && (p.split('/').pop() ?? '').startsWith('.');
  // The options the service once gave chokidar, with or without awaitWriteFinish.
  const options = { depth: 0, ignoreInitial: false, followSymlinks: false, ignored };
  let close: () => Promise<void>;
  if (which === WATCHERS[2]) {
    const raw = fsWatch(dir, (_e, f) => {
      if (f === name && seen === undefined) seen = nowMs();
    });
    close = async () => raw.close();
  } else {
    const w = chokidarWatch(dir, which === WATCHERS[0] ? options : { ...options, awaitWriteFinish: { stabilityThreshold: 50, pollInterval: 25 } });
    // What the service listens to.
    const on = (p: string) => {
      if (p.endsWith(`/${name}`) && seen === undefined) seen = nowMs();
    };
    w.on('add', on);
    w.on('change', on);
    await new Promise<void>((r) => w.once('ready', () => r()));
    close = () => w.close();
  }
  const between = ([a, b]: readonly [number, number]) => a + Math.random() * (b - a);
  try {
    for (let i = 0; i < n; i++) {
      const v = version(tmpl);
      const tmp = join(dir, '.w.tmp');
      await writeFile(tmp, v.bytes);
      seen = undefined;
      const t0 = nowMs();
      await rename(tmp, join(dir, name));
      const deadline = t0 + missAfterMs;
      while (seen === undefined && nowMs() < deadline) await sleep(1);
      if (seen === undefined) out.missed++;
      else out.latency.push(seen - t0);
      await sleep(between(pattern.claimAfter));
      await rename(join(dir, name), join(away, `${i}.json`));
      await sleep(between(pattern.nextAfter));
    }
  } finally {
    await close();
  }
  return out;
}
