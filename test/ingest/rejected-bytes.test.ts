/**
 * REJECTED_DIR kept under ingest.rejected_max_bytes (src/ingest/rejections/rejected-bytes.ts):
 * past it the oldest rejected drops go, their log entries too, down to nine tenths of the bound;
 * drops whose time is unknown are counted and kept. On a real folder.
 */
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bytesUnder, createRejectedBytes, purgeToBytes } from '../../src/ingest/rejections/rejected-bytes.js';
import { capturingLogger } from '../helpers/log.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

const KB = 1024;
/** A rejected drop as writeRejection leaves it: REJECTED_DIR/<id>/<filename> and reason.json. */
async function reject(dir: string, minute: number, bytes: number): Promise<string> {
  const at = new Date(Date.UTC(2026, 10, 28, 12, minute));
  const id = `${at.toISOString().replace(/[-:.]/g, '')}-c${minute}`;
  await mkdir(join(dir, id));
  await writeFile(join(dir, id, 'site_live_northwind_soccer.json'), Buffer.alloc(bytes, 0x20));
  await writeFile(
    join(dir, id, 'reason.json'),
    JSON.stringify({ id, filename: 'site_live_northwind_soccer.json', reason: 'invalid_json', detail: 'x', received_at: at.toISOString() }),
  );
  return id;
}

describe('the bytes of REJECTED_DIR', () => {
  it('are trimmed oldest first to the bound given, keeping drops of unknown time', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-rejected-bytes-'));
    dirs.push(dir);
    const ids = [];
    for (let m = 0; m < 5; m++) ids.push(await reject(dir, m, 100 * KB));
    await mkdir(join(dir, 'no-time-here'));
    await writeFile(join(dir, 'no-time-here', 'x.json'), Buffer.alloc(50 * KB));
    const before = await bytesUnder(dir);
    expect(before).toBeGreaterThan(550 * KB);
    const forgotten: string[] = [];
    const { removed, bytes } = await purgeToBytes(dir, 290 * KB, async (gone) => void forgotten.push(...gone));
    expect(removed.map((r) => r.id)).toEqual(ids.slice(0, 3));
    expect(forgotten).toEqual(ids.slice(0, 3));
    expect(bytes).toBe(await bytesUnder(dir));
    expect(bytes).toBeLessThanOrEqual(290 * KB);
    expect((await readdir(dir)).sort()).toEqual([...ids.slice(3), 'no-time-here'].sort());
  });

  it('a worker measures at start, counts each rejection, and trims past the bound to nine tenths of it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-rejected-bytes-'));
    dirs.push(dir);
    const first = await reject(dir, 0, 290 * KB);
    const { log, lines } = capturingLogger();
    const forgotten: string[] = [];
    const bound = createRejectedBytes({ rejectedDir: dir, maxBytes: 1000 * KB, forget: async (gone) => void forgotten.push(...gone), log });
    await bound.settled();
    const second = await reject(dir, 1, 290 * KB);
    await bound.added(second);
    await bound.settled();
    expect(await readdir(dir)).toHaveLength(2); // 580 KB: under the bound
    const third = await reject(dir, 2, 290 * KB);
    await bound.added(third);
    const fourth = await reject(dir, 3, 290 * KB);
    await bound.added(fourth);
    await bound.settled();
    // 1,160 KB passed 1,000: the oldest go until at most 900 KB are left.
    expect(forgotten).toEqual([first]);
    expect((await readdir(dir)).sort()).toEqual([second, third, fourth].sort());
    expect(lines.some((l) => l.msg === 'removed the oldest rejected drops past ingest.rejected_max_bytes')).toBe(true);
  });

  it('with no bound (0), keeps everything', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-rejected-bytes-'));
    dirs.push(dir);
    const { log } = capturingLogger();
    const bound = createRejectedBytes({ rejectedDir: dir, maxBytes: 0, forget: async () => undefined, log });
    for (let m = 0; m < 3; m++) await bound.added(await reject(dir, m, 100 * KB));
    await bound.settled();
    expect(await readdir(dir)).toHaveLength(3);
  });
});
