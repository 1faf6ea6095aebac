/**
 * Before `publish` and `rejected retry` move anything into INBOX_DIR/.processing: is this
 * command's INBOX_DIR the inbox the running workers watch? Their claim jobs name a file in
 * .processing; a worker watching another folder (another machine without a shared filesystem,
 * another DATA_DIR) cannot see it and settles the job as `gone`, leaving the file stranded.
 * - the marker in INBOX_DIR (ingest/inbox-marker.ts) holds an id a running worker registered: go on;
 * - otherwise, workers connected to the queue watch another inbox: refuse (InboxMismatchError);
 * - no worker connected at all: go on (the jobs wait in the queue) with a warning on stderr.
 */
import { resolve } from 'node:path';
import { InboxMismatchError } from '../errors.js';
import { inboxWatched, readInboxMarker } from '../ingest/inbox-marker.js';
import { createQueueCounts } from '../ops/queue-counts.js';
import type { CliContext } from './context.js';

export async function checkInboxWatched(ctx: CliContext): Promise<void> {
  const config = ctx.config();
  const redis = await ctx.redis();
  const inbox = resolve(config.inboxDir);
  const id = await readInboxMarker(inbox);
  if (id !== undefined && (await inboxWatched(redis, ctx.keys(), id))) return;
  // The same count as `oddsfiles status` (CLIENT LIST); null when Redis refuses to say.
  const workers = await createQueueCounts(redis, config.redis.prefix)
    .getWorkersCount()
    .catch(() => null);
  if (workers === null) {
    ctx.io.stderr.write(
      `warning: cannot tell whether a running worker watches ${inbox} (Redis refused CLIENT LIST); if the workers watch another inbox, the files will not be published\n`,
    );
    return;
  }
  if (workers > 0) throw new InboxMismatchError(inbox);
  ctx.io.stderr.write(`warning: no worker is running: the files wait in the queue until a worker that watches ${inbox} starts\n`);
}
