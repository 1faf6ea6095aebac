/**
 * Is this command's INBOX_DIR the inbox the running workers watch? Asked before `publish` and
 * `rejected retry` move anything into INBOX_DIR/.processing, and by `rejected list` and `status`,
 * whose folders come from the same environment (relative DATA_DIR, INBOX_DIR and REJECTED_DIR are
 * resolved against the folder the command runs in). Claim jobs name a file in .processing; a worker
 * watching another folder (another machine without a shared filesystem, another DATA_DIR) cannot
 * see it and settles the job as `gone`, leaving the file stranded.
 * - the marker in INBOX_DIR (ingest/drop-folder/inbox-marker.ts) holds an id a running worker registered: watched;
 * - otherwise, workers connected to the queue watch another inbox: `other` (they say where);
 * - no worker connected at all: `none`; Redis refusing CLIENT LIST: `unknown`.
 */
import { resolve } from 'node:path';
import { InboxMismatchError } from '../errors.js';
import { inboxWatched, readInboxMarker, watchedInboxes, type WatchedInbox } from '../ingest/drop-folder/inbox-marker.js';
import { createQueueCounts } from '../ops/queue-counts.js';
import type { CliContext } from './context.js';

export interface InboxState {
  /** This command's INBOX_DIR, absolute. */
  readonly inbox: string;
  readonly state: 'watched' | 'other' | 'none' | 'unknown';
  /** Where the running workers watch (those that registered). */
  readonly workersWatch: WatchedInbox[];
}

export async function inboxState(ctx: CliContext): Promise<InboxState> {
  const config = ctx.config();
  const redis = await ctx.redis();
  const inbox = resolve(config.inboxDir);
  const id = await readInboxMarker(inbox);
  const workersWatch = await watchedInboxes(redis, ctx.keys()).catch(() => []);
  if (id !== undefined && (await inboxWatched(redis, ctx.keys(), id))) return { inbox, state: 'watched', workersWatch };
  // The same count as `oddsfiles status` (CLIENT LIST); null when Redis refuses to say.
  const workers = await createQueueCounts(redis, config.redis.prefix)
    .getWorkersCount()
    .catch(() => null);
  const state = workers === null ? 'unknown' : workers > 0 ? 'other' : 'none';
  return { inbox, state, workersWatch };
}

/** `rejected list` and the like: refused (InboxMismatchError) when the running workers watch another inbox. */
export async function refuseOtherInbox(ctx: CliContext): Promise<InboxState> {
  const s = await inboxState(ctx);
  if (s.state === 'other') throw new InboxMismatchError(s.inbox, s.workersWatch);
  return s;
}

/** `publish` and `rejected retry`: refused as above; with no worker running (or no telling), a warning on stderr. */
export async function checkInboxWatched(ctx: CliContext): Promise<void> {
  const { inbox, state } = await refuseOtherInbox(ctx);
  if (state === 'unknown')
    ctx.io.stderr.write(
      `warning: cannot tell whether a running worker watches ${inbox} (Redis refused CLIENT LIST); if the workers watch another inbox, the files will not be published\n`,
    );
  if (state === 'none') ctx.io.stderr.write(`warning: no worker is running: the files wait in the queue until a worker that watches ${inbox} starts\n`);
}
