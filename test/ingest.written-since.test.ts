/**
 * Whether a settled claim was written after it was read (src/ingest/drop-folder/written-since.ts):
 * told by its size, times and inode, and by its bytes only when its last write and its ctime share
 * one time (a rewrite within that tick could leave the times alike).
 */
import { chmod, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { lstatSync, openSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readClaim } from '../src/ingest/drop-folder/inbox.js';
import { seenClaim, writtenSince, type SeenClaim } from '../src/ingest/drop-folder/written-since.js';
import { sha256Hex } from '../src/sha256.js';

describe('writtenSince', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oddsfiles-written-since-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** Writes `text` over the file in place, through an open descriptor (same inode). */
  const rewriteInPlace = (path: string, text: string) => {
    const fd = openSync(path, 'r+');
    try {
      writeSync(fd, Buffer.from(text), 0, text.length, 0);
    } finally {
      closeSync(fd);
    }
  };

  /** What a read of the file as it is now would have seen. */
  const seenNow = (path: string, bytes: Buffer): SeenClaim => {
    const st = lstatSync(path);
    return { size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino, statAtMs: Date.now(), sha256: sha256Hex(bytes) };
  };

  for (const syncIo of [262_144, 0]) {
    const how = syncIo > 0 ? 'synchronous calls' : 'the thread pool';
    it(`a claimed drop rewritten in place, same size, is written since; one left alone is not (${how})`, async () => {
      const path = join(dir, 'claim.json');
      await writeFile(join(dir, 'drop.json'), '{"v":1}');
      await rename(join(dir, 'drop.json'), path);
      const read = await readClaim(path, 1000, undefined, syncIo);
      const seen = seenClaim(read, sha256Hex(read.bytes));
      expect(await writtenSince(path, seen, syncIo, read.bytes)).toBe(false);
      rewriteInPlace(path, '{"v":2}');
      expect(await writtenSince(path, seen, syncIo, read.bytes)).toBe(true);
    });

    it(`a claim gone is not written since (${how})`, async () => {
      const path = join(dir, 'claim.json');
      await writeFile(path, '{"v":1}');
      const read = await readClaim(path, 1000, undefined, syncIo);
      await rm(path);
      expect(await writtenSince(path, seenClaim(read, sha256Hex(read.bytes)), syncIo, read.bytes)).toBe(false);
    });
  }

  it('last write and ctime at one time, read within that tick: the bytes decide', async () => {
    const path = join(dir, 'claim.json');
    await writeFile(path, '{"v":1}');
    rewriteInPlace(path, '{"v":2}');
    // As if the rewrite had left the times as they were read: the bytes read were the old ones.
    const seen = seenNow(path, Buffer.from('{"v":1}'));
    expect(seen.mtimeMs).toBe(seen.ctimeMs);
    expect(await writtenSince(path, seen, 262_144, Buffer.from('{"v":1}'))).toBe(true);
    expect(await writtenSince(path, seen, 262_144)).toBe(true);
    expect(await writtenSince(path, seenNow(path, Buffer.from('{"v":2}')), 262_144, Buffer.from('{"v":2}'))).toBe(false);
  });

  it('a ctime stamped after the last write (the claim, a chmod): the times decide, the bytes are not read again', async () => {
    const path = join(dir, 'claim.json');
    await writeFile(path, '{"v":1}');
    await new Promise((r) => setTimeout(r, 20));
    await chmod(path, 0o640);
    // Times as read: a later write would stamp mtime and ctime with one new time.
    const seen = seenNow(path, Buffer.from('{"v":0}'));
    expect(seen.mtimeMs).not.toBe(seen.ctimeMs);
    expect(await writtenSince(path, seen, 262_144, Buffer.from('{"v":0}'))).toBe(false);
  });
});
