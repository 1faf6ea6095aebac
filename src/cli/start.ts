import type { Command } from 'commander';
import { UsageError } from '../errors.js';
import { createLogger, flushLogger } from '../log.js';
import { ROLES, startService, type Role } from '../service.js';
import type { CliContext } from './context.js';

export function parseRoles(text: string): Role[] {
  const roles = text.split(',').map((r) => r.trim()).filter(Boolean);
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
      // Buffered, asynchronous writes when stdout is not a terminal (a request line each request).
      const log = createLogger({ level: config.logLevel, async: true });
      const service = await startService(config, roles, log);
      await new Promise<void>((resolve) => {
        let stopping = false;
        const stop = (signal: string) => {
          if (stopping) {
            // process.exit runs the 'exit' handlers: pino writes what it buffers synchronously.
            log.warn('second signal: exiting now');
            process.exit(1);
          }
          stopping = true;
          log.info({ signal }, 'stopping: draining in-flight work');
          service.close().then(resolve, resolve);
        };
        process.once('SIGINT', () => stop('SIGINT'));
        process.once('SIGTERM', () => stop('SIGTERM'));
      });
      log.info('stopped');
      await flushLogger(log);
    });
}
