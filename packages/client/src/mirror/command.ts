/** The `oddsfiles-mirror` command line (the same options as `oddsfiles mirror`). */
import { parseArgs } from 'node:util';
import { KEY_ENV, runMirror, type MirrorIO, type MirrorOptions } from './mirror.js';
import { MIRROR_NOTES } from './notes.js';

export const MIRROR_USAGE = `Usage: oddsfiles-mirror --url URL [--key KEY] DIR [options]

Keep DIR byte-identical to the current version of every file your key may read.

  --url URL          the service, e.g. https://odds.example.com
  --key KEY          your API key (or set ${KEY_ENV}, which keeps it off the command line)
  --conflate MS      at most one stream write per MS milliseconds, the latest of each file (0-60000)
  --exec CMD         run CMD (with sh) after each change; ODDSFILES_EVENT, ODDSFILES_FILE,
                     ODDSFILES_PATH, ODDSFILES_ETAG, ODDSFILES_GENERATED_AT, ODDSFILES_POSITION set
  --once             sync once and exit (for cron)
  --json             one JSON line per change on stdout
  --keep             keep files that leave your key's list (default: remove them)
  -h, --help         this text

${MIRROR_NOTES}`;

/** The options of a command line, or the usage error to print. */
export function parseMirrorArgs(argv: readonly string[]): MirrorOptions | { readonly help: true } | { readonly error: string } {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        key: { type: 'string' },
        conflate: { type: 'string' },
        exec: { type: 'string' },
        once: { type: 'boolean' },
        json: { type: 'boolean' },
        keep: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    return { error: (err as Error).message };
  }
  const v = parsed.values;
  if (v.help) return { help: true };
  if (v.url === undefined) return { error: 'give the service with --url' };
  if (parsed.positionals.length !== 1) return { error: 'give one folder (DIR) to keep the files in' };
  let conflateMs: number | undefined;
  if (v.conflate !== undefined) {
    if (!/^\d{1,5}$/.test(v.conflate)) return { error: '--conflate is a whole number of milliseconds from 0 to 60000' };
    conflateMs = Number(v.conflate);
  }
  return { url: v.url, key: v.key, dir: parsed.positionals[0]!, conflateMs, exec: v.exec, once: v.once, json: v.json, keep: v.keep };
}

export async function mirrorCommand(argv: readonly string[], io: MirrorIO): Promise<number> {
  const opts = parseMirrorArgs(argv);
  if ('help' in opts) {
    io.stdout.write(MIRROR_USAGE);
    return 0;
  }
  if ('error' in opts) {
    io.stderr.write(`oddsfiles-mirror: ${opts.error}\n(run with --help for usage)\n`);
    return 2;
  }
  return runMirror(opts, io);
}
