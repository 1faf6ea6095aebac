/** What both mirror commands (`oddsfiles mirror`, `oddsfiles-mirror`) print after their options: where the state is kept, and the exit codes. */
export const MIRROR_NOTES = `State (position, versions) is kept in DIR/.oddsfiles-mirror.json: a restart resumes from it.
Exit codes: 0 done or stopped (SIGINT/SIGTERM); 1 cannot go on (the key refused, revoked or
without access, the service unreachable in 3 tries at start, DIR not writable for 2 minutes,
5 s with --once); 2 bad usage (a missing key, a bad URL, a URL that redirects).
`;
