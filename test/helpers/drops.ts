/** Dropping files the way docs/publishers.md tells publishers to: write a dotfile, then rename. */
import { randomBytes } from 'node:crypto';
import { readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export async function drop(inbox: string, name: string, bytes: Buffer | string): Promise<void> {
  const tmp = join(inbox, `.${name}.${randomBytes(4).toString('hex')}.tmp`);
  await writeFile(tmp, bytes);
  await rename(tmp, join(inbox, name));
}

/** Files still waiting in the inbox or claimed in .processing (temp files excluded). */
export async function pendingDrops(inbox: string): Promise<string[]> {
  const top = await readdir(inbox).catch(() => [] as string[]);
  const processing = await readdir(join(inbox, '.processing')).catch(() => [] as string[]);
  return [...top.filter((n) => !n.startsWith('.')), ...processing.filter((n) => !n.startsWith('.')).map((n) => `.processing/${n}`)];
}

/** A small valid document for one feed with a given generated_at. */
export function tinyDoc(bookmaker: string, sport: string | null, generatedAt: string, extra: Record<string, unknown> = {}): Buffer {
  return Buffer.from(JSON.stringify({ bookmaker, generated_at: generatedAt, ...(sport ? { sport } : {}), events: [], ...extra }));
}

/** The reason.json of every rejected drop under `rejectedDir` (none yet: an empty list). */
export async function rejectionRecords(rejectedDir: string): Promise<Record<string, string>[]> {
  const ids = await readdir(rejectedDir).catch(() => [] as string[]);
  return Promise.all(
    ids.filter((i) => !i.startsWith('.')).map(async (id) => JSON.parse(await readFile(join(rejectedDir, id, 'reason.json'), 'utf8')) as Record<string, string>),
  );
}
