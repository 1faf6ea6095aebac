/**
 * `oddsfiles mirror --url URL --key KEY DIR`: the consumer's mirror of @oddsfiles/client (the same
 * code as its `oddsfiles-mirror` command), loaded with `import()` only when run. Stops cleanly on
 * SIGINT/SIGTERM, writing its state first.
 */
import type { Command } from 'commander';
import { MIRROR_NOTES } from '@oddsfiles/client/mirror/notes';
import type { CliContext } from './context.js';

interface MirrorFlags {
  url: string;
  key?: string;
  conflate?: string;
  exec?: string;
  once?: boolean;
  json?: boolean;
  keep?: boolean;
}

export function registerMirrorCommand(program: Command, ctx: CliContext): void {
  program
    .command('mirror')
    .description("keep DIR byte-identical to the current version of every file a consumer's key may read")
    .argument('<dir>', 'the folder to keep the files in (its state: DIR/.oddsfiles-mirror.json)')
    .requiredOption('--url <url>', 'the service, e.g. https://odds.example.com')
    .option('--key <key>', 'the API key (or ODDSFILES_KEY in the environment, which keeps it off the command line)')
    .option('--conflate <ms>', "at most one stream write per this many ms, the latest change of each file (the stream's conflate)")
    .option('--exec <cmd>', 'run a command after each change (ODDSFILES_FILE, ODDSFILES_ETAG, ODDSFILES_PATH, ... in its environment)')
    .option('--once', 'sync once and exit (for cron)')
    .option('--json', 'one JSON line per change on stdout')
    .option('--keep', "keep files that leave the key's list")
    .addHelpText('after', `\n${MIRROR_NOTES.trimEnd()}`)
    .action(async (dir: string, flags: MirrorFlags) => {
      const { runMirror } = await import('@oddsfiles/client/mirror');
      let conflateMs: number | undefined;
      if (flags.conflate !== undefined) conflateMs = /^\d{1,5}$/.test(flags.conflate) ? Number(flags.conflate) : Number.NaN;
      const stop = new AbortController();
      const onSignal = () => stop.abort();
      process.once('SIGINT', onSignal).once('SIGTERM', onSignal);
      try {
        process.exitCode = await runMirror(
          { url: flags.url, key: flags.key, dir, conflateMs, exec: flags.exec, once: flags.once, json: flags.json, keep: flags.keep },
          { stdout: ctx.io.stdout, stderr: ctx.io.stderr, env: ctx.env, cwd: ctx.cwd, signal: stop.signal },
        );
      } finally {
        process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
      }
    });
}
