/**
 * REJECTED_DIR/<id>/ holds a rejected drop under its own name, with reason.json beside it
 * (CONTRACT §3). Written crash-safely: the folder appears whole (built under a temp name, then
 * renamed) before the claim is removed, and its id comes from the claim, so a retry after a crash
 * finds it done instead of rejecting twice.
 */
import { access, copyFile, link, mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RejectionReason } from '../errors.js';

export interface RejectionRecord {
  readonly id: string;
  readonly filename: string;
  readonly reason: RejectionReason;
  readonly detail: string;
  readonly received_at: string;
}

export function rejectionId(receivedAt: Date, claimId: string): string {
  return `${receivedAt.toISOString().replace(/[-:.]/g, '')}-${claimId}`;
}

export async function writeRejection(rejectedDir: string, record: RejectionRecord, claimPath: string): Promise<void> {
  const final = join(rejectedDir, record.id);
  if (await exists(join(final, 'reason.json'))) return;
  const tmp = join(rejectedDir, `.${record.id}.tmp`);
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  const target = join(tmp, record.filename);
  try {
    await link(claimPath, target);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV' && (err as NodeJS.ErrnoException).code !== 'EPERM') throw err;
    await copyFile(claimPath, target);
  }
  await writeFile(join(tmp, 'reason.json'), `${JSON.stringify(record, null, 2)}\n`);
  await rename(tmp, final);
}

export async function listRejections(rejectedDir: string): Promise<RejectionRecord[]> {
  let names: string[];
  try {
    names = await readdir(rejectedDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const out: RejectionRecord[] = [];
  for (const name of names.sort()) {
    if (name.startsWith('.')) continue;
    const r = await readRejection(rejectedDir, name);
    if (r) out.push(r);
  }
  return out;
}

export async function readRejection(rejectedDir: string, id: string): Promise<RejectionRecord | undefined> {
  if (!/^[A-Za-z0-9_-]+$/.test(id)) return undefined;
  try {
    return JSON.parse(await readFile(join(rejectedDir, id, 'reason.json'), 'utf8')) as RejectionRecord;
  } catch {
    return undefined;
  }
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
