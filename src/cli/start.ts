import type { Command } from 'commander';
import { requireMarketplaceSecrets } from '../config.js';
import { UsageError } from '../errors.js';
import { createLogger, flushLogger } from '../log.js';
import { ROLES, startService, type Role } from '../service.js';
import type { CliContext } from './context.js';

/** A signal within this long of the first one counts as the same (see stop below). */
const SAME_SIGNAL_MS = 1000;

export function parseRoles(text: string): Role[] {
  const roles = text
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  const unknown = roles.filter((r) => !(ROLES as readonly string[]).includes(r));
  if (roles.length === 0 || unknown.length > 0) {
    throw new UsageError(`--roles takes a comma-separated list of ${ROLES.join(', ')}${unknown.length ? `; unknown: ${unknown.join(', ')}` : ''}`);
  }
  return [...new Set(roles)] as Role[];
}

export function registerStartCommand(program: Command, ctx: CliContext): void {
  program
    .command('start')
    .description('run the service until SIGINT/SIGTERM, then drain and exit')
    .option('--roles <roles>', `comma-separated roles to run: ${ROLES.join(',')}`, ROLES.join(','))
    .action(async (opts: { roles: string }) => {
      const roles = parseRoles(opts.roles);
      const config = ctx.config();
      // A reader serves marketplace traffic: its proxy secrets must be set (the others need none).
      if (roles.includes('reader')) requireMarketplaceSecrets(config);
      // Buffered, asynchronous writes when stdout is not a terminal (a request line each request).
      const log = createLogger({ level: config.logLevel, async: true });
      const service = await startService(config, roles, log);
      let firstAt: number | undefined;
      await new Promise<void>((resolve) => {
        const stop = (signal: string) => {
          if (firstAt !== undefined) {
            // One Ctrl-C reaches the service twice under `npm start`: the terminal signals the
            // whole process group, and npm passes its own on, a few ms apart. A signal this close
            // to the first is the same keypress.
            if (performance.now() - firstAt < SAME_SIGNAL_MS) return;
            // process.exit runs the 'exit' handlers: pino writes what it buffers synchronously.
            log.warn('second signal: exiting now');
            process.exit(1);
          }
          firstAt = performance.now();
          log.info({ signal }, 'stopping: draining in-flight work');
          service.close().then(resolve, resolve);
        };
        // `on`, not `once`: a second signal must reach stop() too (with `once` it got the default
        // action, death by the signal, without the line above and without pino's final write).
        process.on('SIGINT', () => stop('SIGINT'));
        process.on('SIGTERM', () => stop('SIGTERM'));
      });
      log.info('stopped');
      await flushLogger(log);
      // The same keypress's later copy (npm passes its signal on when it gets to it) must still
      // find the handler: arriving while the process exits, it would kill it with that signal.
      const sameUntil = (firstAt ?? 0) + SAME_SIGNAL_MS - performance.now();
      if (sameUntil > 0) await new Promise((resolve) => setTimeout(resolve, sameUntil));
    });
}
