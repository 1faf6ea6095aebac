/**
 * Whether a settled claim was written again in place (src/ingest/drop-folder/written-since.ts),
 * and the removal of settled claims that relies on it (src/ingest/background/claim-removal.ts),
 * on a real folder. A rewrite right after the read, of the same size, can land in the same tick
 * of the kernel's coarse clock (kernels without fine-grained timestamps), and a single write
 * already under way when the times were read, paused mid-copy, changes them no more on any kernel:
 * the times stay as they were seen, and only the bytes read again can tell. The cases here make
 * that happen on any kernel: what was seen is given the claim's times as they are after the
 * rewrite, so the bytes decide, on every way of reading again (synchronously into the shared
 * buffer, on the thread pool; compared with the bytes held, or by their SHA-256).
 */
import { randomBytes } from 'node:crypto';
import { lstat, mkdtemp, open, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createClaimRemoval } from '../../src/ingest/background/claim-removal.js';
import { readClaim } from '../../src/ingest/drop-folder/inbox.js';
import { seenClaim, writtenSince, type SeenClaim } from '../../src/ingest/drop-folder/written-since.js';
import { sha256Hex } from '../../src/sha256.js';
import { capturingLogger } from '../helpers/log.js';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oddsfiles-written-since-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A claim of `size` random bytes, read as the publish step reads it. */
async function claim(name: string, size: number): Promise<{ path: string; seen: SeenClaim; held: Buffer }> {
  const path = join(dir, name);
  await writeFile(path, randomBytes(size));
  const read = await readClaim(path, 64 * 1024 * 1024, undefined, 256 * 1024);
  return { path, seen: seenClaim(read, sha256Hex(read.bytes)), held: read.bytes };
}

/** Write other bytes of the same size over the claim, through an open descriptor (in place). */
async function rewriteInPlace(path: string, size: number): Promise<void> {
  const fh = await open(path, 'r+');
  try {
    await fh.write(randomBytes(size), 0, size, 0);
  } finally {
    await fh.close();
  }
}

/** The claim as if every write so far had landed in the tick of its read: its times now, its bytes as read. */
async function sameTick<C extends { path: string; seen: SeenClaim }>(c: C): Promise<C> {
  const st = await lstat(c.path);
  return { ...c, seen: { ...c.seen, size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino, statAtMs: Math.max(st.mtimeMs, st.ctimeMs) } };
}

const WAYS = [
  { name: 'synchronously, compared with the bytes held', sync: 256 * 1024, held: true },
  { name: 'synchronously, by SHA-256', sync: 256 * 1024, held: false },
  { name: 'on the thread pool, compared with the bytes held', sync: 0, held: true },
  { name: 'on the thread pool, by SHA-256', sync: 0, held: false },
];

describe('a settled claim written again in place', () => {
  for (const way of WAYS) {
    it(`is told from one left alone: read again ${way.name}`, async () => {
      for (let i = 0; i < 20; i++) {
        const size = 1000 + 4000 * i;
        const kept = await sameTick(await claim(`kept-${i}`, size));
        let rewritten = await claim(`rewritten-${i}`, size);
        await rewriteInPlace(rewritten.path, size);
        rewritten = await sameTick(rewritten);
        const [a, b] = await Promise.all([
          writtenSince(kept.path, kept.seen, way.sync, way.held ? kept.held : undefined),
          writtenSince(rewritten.path, rewritten.seen, way.sync, way.held ? rewritten.held : undefined),
        ]);
        expect([a, b], `round ${i}`).toEqual([false, true]);
      }
    });
  }

  it('is told from one left alone when bigger than the sync-I/O size (read again in chunks of 1 MiB): a change in the last chunk only', async () => {
    const size = 3 * 1024 * 1024 + 12_345;
    for (const held of [true, false]) {
      const kept = await sameTick(await claim(`big-kept-${held}`, size));
      let changed = await claim(`big-changed-${held}`, size);
      const fh = await open(changed.path, 'r+');
      await fh.write(Buffer.from('~changed~'), 0, 9, size - 100);
      await fh.close();
      changed = await sameTick(changed);
      const [a, b] = await Promise.all([
        writtenSince(kept.path, kept.seen, 256 * 1024, held ? kept.held : undefined),
        writtenSince(changed.path, changed.seen, 256 * 1024, held ? changed.held : undefined),
      ]);
      expect([a, b], held ? 'compared with the bytes held' : 'by SHA-256').toEqual([false, true]);
    }
  });

  it('is told at a later check after an earlier one found the bytes unchanged: a write already under way that pauses mid-copy leaves the times alike', async () => {
    for (const held of [true, false]) {
      const first = await sameTick(await claim(`paused-${held}`, 100_000));
      expect(await writtenSince(first.path, first.seen, 256 * 1024, held ? first.held : undefined)).toBe(false);
      // The write goes on: new bytes, the times as they were when the first check looked.
      await rewriteInPlace(first.path, 100_000);
      const later = await sameTick(first);
      expect(await writtenSince(later.path, later.seen, 256 * 1024, held ? later.held : undefined)).toBe(true);
    }
  });

  it('reads claims of growing sizes one after another into the shared buffer without mixing them up', async () => {
    const claims = [];
    for (const size of [10, 200_000, 50, 150_000, 250_000, 1]) claims.push(await claim(`c${size}`, size));
    await rewriteInPlace(claims[3]!.path, 150_000);
    const out = [];
    for (const c of claims) out.push(await writtenSince(c.path, (await sameTick(c)).seen, 256 * 1024, undefined));
    expect(out).toEqual([false, false, false, true, false, false]);
    // A claim that is gone was not written again.
    await rm(claims[0]!.path);
    expect(await writtenSince(claims[0]!.path, claims[0]!.seen, 256 * 1024, claims[0]!.held)).toBe(false);
  });
});

describe('removing settled claims once a manifest covers them', () => {
  it('removes the claims left alone and keeps the ones written again in place, with or without their bytes held', async () => {
    const { log } = capturingLogger();
    const removal = createClaimRemoval({ log, syncIoMaxBytes: 256 * 1024 });
    const names: string[] = [];
    for (let i = 0; i < 8; i++) {
      const name = `${i % 2 ? 'rewritten' : 'kept'}-${i}`;
      let c = await claim(name, 100_000);
      if (i % 2) await rewriteInPlace(c.path, 100_000);
      c = await sameTick(c);
      removal.afterManifest(i, i < 4 ? c : { path: c.path, seen: c.seen }, versionOf(name, 100_000));
      names.push(name);
    }
    expect(removal.pending()).toBe(8);
    expect(await removal.removeCovered(7, () => true)).toBe(0);
    expect(removal.pending()).toBe(0);
    expect((await readdir(dir)).sort()).toEqual(names.filter((n) => n.startsWith('rewritten')).sort());
  });

  it('keeps the claim of a commit the manifest does not hold (Redis lost it), for recovery to publish again', async () => {
    const { log, lines } = capturingLogger();
    const removal = createClaimRemoval({ log });
    const held = await claim('held-1', 10);
    const lost = await claim('lost-2', 10);
    const later = await claim('later-3', 10);
    removal.afterManifest(1, held, versionOf('held-1', 10));
    removal.afterManifest(2, lost, versionOf('lost-2', 10));
    removal.afterManifest(5, later, versionOf('later-3', 10));
    // The manifest at seq 4 holds the first version only: the second's seq now names another commit.
    expect(await removal.removeCovered(4, (v) => v.filename === 'held-1')).toBe(1);
    expect((await readdir(dir)).sort()).toEqual(['later-3', 'lost-2']);
    expect(lines.some((l) => String(l.msg).includes('Redis lost the commit'))).toBe(true);
    expect(removal.pending()).toBe(1);
    // After the catalog went back, a waiting claim is judged by the next manifest whatever its seq.
    removal.rebase();
    expect(await removal.removeCovered(0, () => true)).toBe(0);
    expect(await readdir(dir)).toEqual(['lost-2']);
    expect(removal.pending()).toBe(0);
  });
});

function versionOf(filename: string, size: number) {
  return { filename, sha256: filename.padEnd(64, '0'), generatedAtMs: 1, publishedAt: '2026-01-01T00:00:00.000Z', size };
}
