import { mkdir, mkdtemp, readFile, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exists, ifExists, isMissing } from '../../src/missing.js';

describe('missing: only "not there" is swallowed', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oddsfiles-missing-'));
    await writeFile(join(dir, 'file.json'), '{}');
    await mkdir(join(dir, 'folder'));
    await symlink(join(dir, 'nowhere'), join(dir, 'dangling'));
    await symlink(join(dir, 'loop-b'), join(dir, 'loop-a'));
    await symlink(join(dir, 'loop-a'), join(dir, 'loop-b'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('a missing path (ENOENT) or one through a file (ENOTDIR) reads as undefined', async () => {
    expect(await ifExists(readFile(join(dir, 'absent.json')))).toBeUndefined();
    expect(await ifExists(readdir(join(dir, 'absent')))).toBeUndefined();
    expect(await ifExists(stat(join(dir, 'file.json', 'inside')))).toBeUndefined();
    expect(await exists(join(dir, 'absent.json'))).toBe(false);
  });

  it('what is there is returned as it is', async () => {
    expect((await ifExists(readFile(join(dir, 'file.json'), 'utf8'))) ?? 'none').toBe('{}');
    expect(await exists(join(dir, 'file.json'))).toBe(true);
    expect(await exists(join(dir, 'folder'))).toBe(true);
    // lstat: a link counts as itself, even when its target is gone.
    expect(await exists(join(dir, 'dangling'))).toBe(true);
  });

  it('every other error is thrown on: a folder read as a file (EISDIR), a loop of links (ELOOP)', async () => {
    await expect(ifExists(readFile(join(dir, 'folder')))).rejects.toMatchObject({ code: 'EISDIR' });
    await expect(ifExists(stat(join(dir, 'loop-a')))).rejects.toMatchObject({ code: 'ELOOP' });
    await expect(ifExists(Promise.reject(new Error('no code')))).rejects.toThrow('no code');
  });

  it('isMissing tells the codes apart', () => {
    const coded = (code: string) => Object.assign(new Error(code), { code });
    expect(isMissing(coded('ENOENT'))).toBe(true);
    expect(isMissing(coded('ENOTDIR'))).toBe(true);
    for (const code of ['EACCES', 'EIO', 'EISDIR', 'EMFILE']) expect(isMissing(coded(code))).toBe(false);
    expect(isMissing(undefined)).toBe(false);
    expect(isMissing(new Error('plain'))).toBe(false);
  });
});
