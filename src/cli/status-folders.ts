/**
 * The folders `oddsfiles status` names: its INBOX_DIR and REJECTED_DIR, absolute (relative ones
 * are resolved against the folder the command runs in), and whether the running workers watch
 * that inbox. Status refuses an inbox folder the workers do not watch; where there is no inbox
 * folder at all (a reader's host), its figures (all from Redis) stand and the mismatch is said.
 */
import { stat } from 'node:fs/promises';
import type { CliContext } from './context.js';
import { inboxState, type InboxState } from './inbox-check.js';

export interface StatusFolders {
  readonly inbox: string;
  readonly rejected: string;
  /** watched, other (the workers watch another inbox), none (no worker running), unknown. */
  readonly inboxState: InboxState['state'];
  /** Where the running workers watch: host and absolute path. */
  readonly workersWatch: InboxState['workersWatch'];
  /** Whether the inbox folder exists here at all. */
  readonly inboxExists: boolean;
}

export async function statusFolders(ctx: CliContext): Promise<StatusFolders> {
  const s = await inboxState(ctx);
  const inboxExists = await stat(s.inbox).then(
    (st) => st.isDirectory(),
    () => false,
  );
  return { inbox: s.inbox, rejected: ctx.config().rejectedDir, inboxState: s.state, workersWatch: s.workersWatch, inboxExists };
}

export function describeFolders(f: StatusFolders): string {
  const theirs = f.workersWatch.map((w) => `${w.inbox} on ${w.host}`).join(', ');
  const note = {
    watched: 'watched by the running workers',
    other: `NOT the inbox the running workers watch${theirs ? `: they watch ${theirs}` : ''}`,
    none: 'no worker running',
    unknown: 'cannot tell whether the running workers watch it',
  }[f.inboxState];
  const advice = f.inboxState === 'other' ? "; run oddsfiles with the service's environment (INBOX_DIR/DATA_DIR, REDIS_URL, REDIS_PREFIX)" : '';
  return `inbox ${f.inbox} (${note}); rejected ${f.rejected}${advice}`;
}
