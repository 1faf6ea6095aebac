/**
 * REJECTED_DIR/<id>/ holds a rejected drop under its own name, with reason.json beside it:
 * `{ "id", "filename", "reason", "detail", "received_at" }`. Written crash-safely: the folder
 * appears whole (built under a temp name, then renamed) before the claim is removed, and its id
 * comes from the claim, so a retry after a crash finds it done instead of rejecting twice.
 * A drop whose bytes were read is kept as those bytes (what the reason is about); its claim is
 * then parked in INBOX_DIR/.rejected-watch/ and watched for late writes (late-writes.ts).
 */
import { copyFile, link, lstat, mkdir, readFile, readdir, readlink, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { RejectionReason } from '../../errors.js';
import { exists, ifExists } from '../../missing.js';

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

/**
 * Keep the claimed drop as REJECTED_DIR/<id>/<filename> with reason.json. `judged`: the bytes the
 * rejection was decided on, written as the kept file (never the claim itself, which a writer may
 * still hold open). Otherwise, whatever the claim is,
 * nothing is followed, opened or read: a regular file is hard-linked (copied when REJECTED_DIR is
 * on another filesystem), a symbolic link is kept as a link (never its target), a FIFO or other
 * special file is hard-linked when possible and otherwise not kept (reason.json says what it
 * was), and a folder is moved in after reason.json exists.
 */
export async function writeRejection(rejectedDir: string, record: RejectionRecord, claimPath: string, judged?: Buffer): Promise<void> {
  const final = join(rejectedDir, record.id);
  const st = await ifExists(lstat(claimPath));
  if (await exists(join(final, 'reason.json'))) {
    // Done before a crash; a folder may still have to be moved in.
    if (st?.isDirectory()) await moveIn(claimPath, join(final, record.filename), record.id);
    return;
  }
  const tmp = join(rejectedDir, `.${record.id}.tmp`);
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  const target = join(tmp, record.filename);
  if (judged) {
    await writeFile(target, judged);
  } else if (st && !st.isDirectory()) {
    try {
      await link(claimPath, target);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EXDEV' && code !== 'EPERM') throw err;
      if (st.isFile()) await copyFile(claimPath, target);
      else if (st.isSymbolicLink()) await symlink(await readlink(claimPath), target);
      // A FIFO, socket or device on another filesystem: copying would open it (a FIFO blocks).
    }
  }
  await writeFile(join(tmp, 'reason.json'), `${JSON.stringify(record, null, 2)}\n`);
  await rename(tmp, final);
  if (st?.isDirectory()) await moveIn(claimPath, join(final, record.filename), record.id);
}

/** Where rejected drops' claims wait, watched for late writes: INBOX_DIR/.rejected-watch/<id> (late-writes.ts). */
export function watchDir(inboxDir: string): string {
  return join(inboxDir, '.rejected-watch');
}

/** Park a rejected drop's claim (in INBOX_DIR/.processing: the same filesystem) under its rejection's id. */
export async function parkRejectedClaim(inboxDir: string, claimPath: string, id: string): Promise<void> {
  await mkdir(watchDir(inboxDir), { recursive: true });
  await ifExists(rename(claimPath, join(watchDir(inboxDir), id)));
}

async function moveIn(from: string, to: string, id: string): Promise<void> {
  try {
    await rename(from, to);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Gone already, or moved in before a crash.
    if (code === 'ENOENT' || code === 'EEXIST' || code === 'ENOTEMPTY') return;
    if (code !== 'EXDEV') throw err;
    // REJECTED_DIR is on another filesystem: park the folder under a hidden name beside the
    // claims (never picked up again), so the claim is settled and nothing is deleted.
    await rename(from, join(dirname(from), `.rejected-${id}`));
  }
}

/** The ids (folders) of the rejected drops in REJECTED_DIR, oldest first; none when it does not exist. */
export async function rejectionIds(rejectedDir: string): Promise<string[]> {
  const names = (await ifExists(readdir(rejectedDir))) ?? [];
  return names.filter((n) => !n.startsWith('.')).sort();
}

export async function listRejections(rejectedDir: string): Promise<RejectionRecord[]> {
  const out: RejectionRecord[] = [];
  for (const name of await rejectionIds(rejectedDir)) {
    const r = await readRejection(rejectedDir, name);
    if (r) out.push(r);
  }
  return out;
}

export async function readRejection(rejectedDir: string, id: string): Promise<RejectionRecord | undefined> {
  if (!/^[A-Za-z0-9_-]+$/.test(id)) return undefined;
  const text = await ifExists(readFile(join(rejectedDir, id, 'reason.json'), 'utf8'));
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as RejectionRecord;
  } catch {
    return undefined; // cut short by a crash while it was written
  }
}
