/**
 * "Not there" on the filesystem, told apart from every other failure: a path that does not exist
 * (ENOENT) or that runs through a file where a folder should be (ENOTDIR) is missing; a refused
 * permission, an I/O error or anything else is a real failure and is thrown on.
 */
import { lstat } from 'node:fs/promises';

/** True for the errors that mean the path is not there. */
export function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** What `op` resolves to, or undefined when what it works on is missing; any other error is thrown. */
export async function ifExists<T>(op: Promise<T>): Promise<T | undefined> {
  try {
    return await op;
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
}

/** Whether something is at `path` (lstat: a symbolic link, even a dangling one, counts as itself). */
export async function exists(path: string): Promise<boolean> {
  return (await ifExists(lstat(path))) !== undefined;
}
