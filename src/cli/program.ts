/** The `oddsfiles` command: every subcommand registered on one commander program. */
import { Command, CommanderError } from 'commander';
import { exitCodeFor } from '../errors.js';
import { type CliContext } from './context.js';
import { registerKeysCommands } from './keys.js';
import { registerMirrorCommand } from './mirror.js';
import { registerPublishCommand } from './publish.js';
import { registerRecoverCommand } from './recover.js';
import { registerRejectedCommands } from './rejected.js';
import { registerStartCommand } from './start.js';
import { registerStatusCommand } from './status.js';

export function buildProgram(ctx: CliContext, version: string): Command {
  const program = new Command('oddsfiles')
    .description('Publish bookmaker odds files: drop folder → queue → validated → published → served over HTTP.')
    .version(version)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ writeOut: (s) => ctx.io.stdout.write(s), writeErr: (s) => ctx.io.stderr.write(s) });
  registerStartCommand(program, ctx);
  registerPublishCommand(program, ctx);
  registerRejectedCommands(program, ctx);
  registerStatusCommand(program, ctx);
  registerKeysCommands(program, ctx);
  registerMirrorCommand(program, ctx);
  registerRecoverCommand(program, ctx);
  program.commands.forEach(function inherit(c: Command) {
    c.exitOverride();
    c.configureOutput({ writeOut: (s) => ctx.io.stdout.write(s), writeErr: (s) => ctx.io.stderr.write(s) });
    c.commands.forEach(inherit);
  });
  return program;
}

/** Run the command line; resolves to the exit code (0 success, 1 failure, 2 bad usage). */
export async function runCli(ctx: CliContext, argv: readonly string[], version: string): Promise<number> {
  const program = buildProgram(ctx, version);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return 0;
      return 2;
    }
    ctx.io.stderr.write(`oddsfiles: ${(err as Error).message}\n`);
    return exitCodeFor(err);
  } finally {
    await ctx.close();
  }
}
