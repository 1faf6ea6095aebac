/**
 * The folders `oddsfiles status` names: its INBOX_DIR and REJECTED_DIR, absolute (relative ones
 * are resolved against the folder the command runs in), and whether the running workers watch
 * that inbox. Status reads everything else from Redis, so another inbox does not make its figures
 * wrong: it is said (and warned about on stderr), not refused.
 */
import type { CliContext } from './context.js';
import { inboxState, type InboxState } from './inbox-check.js';

export interface StatusFolders {
  readonly inbox: string;
  readonly rejected: string;
  /** watched, other (the workers watch another inbox), none (no worker running), unknown. */
  readonly inboxState: InboxState['state'];
  /** Where the running workers watch: host and absolute path. */
  readonly workersWatch: InboxState['workersWatch'];
}

export async function statusFolders(ctx: CliContext): Promise<StatusFolders> {
  const s = await inboxState(ctx);
  return { inbox: s.inbox, rejected: ctx.config().rejectedDir, inboxState: s.state, workersWatch: s.workersWatch };
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
