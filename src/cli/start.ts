import { Option, type Command } from 'commander';
import { requireMarketplaceSecrets } from '../config.js';
import { UsageError } from '../errors.js';
import { createLogger, flushLogger, type Logger } from '../log.js';
import { setHeapGrowth } from '../heap-growth.js';
import { resolveRedis } from '../redis/private-server.js';
import { ROLES, startService, type Role } from '../service.js';
import type { CliContext } from './context.js';
import { checkReusePort, parseProcesses, startReaderProcesses, type ReaderStarted } from './reader-processes.js';

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
    .option('--processes <n>', 'reader processes sharing the port (--roles reader only; Linux): a number, or auto for one per core', '1')
    // A reader process started by `--processes`: it shares the port and reports to its supervisor.
    .addOption(new Option('--reuse-port').hideHelp())
    .action(async (opts: { roles: string; processes: string; reusePort?: boolean }) => {
      const roles = parseRoles(opts.roles);
      const processes = parseProcesses(opts.processes);
      if (processes > 1) return superviseReaders(ctx, roles, processes);
      const config = ctx.config();
      setHeapGrowth(process.execArgv);
      // A reader serves marketplace traffic: its proxy secrets must be set (the others need none).
      if (roles.includes('reader')) requireMarketplaceSecrets(config);
      // Buffered, asynchronous writes when stdout is not a terminal (a request line each request).
      const log = createLogger({ level: config.logLevel, async: true });
      const service = await startService(config, roles, log, { reusePort: opts.reusePort === true });
      const supervised = opts.reusePort === true && process.send !== undefined;
      if (supervised) process.send!({ oddsfiles: 'started', reader: service.readerUrl ?? '' } satisfies ReaderStarted);
      await untilStopped(log, () => service.close(), supervised);
      log.info('stopped');
      await flushLogger(log);
    });
}

/** `--processes N`: N reader processes on one port (reader-processes.ts), until a signal. */
async function superviseReaders(ctx: CliContext, roles: readonly Role[], count: number): Promise<void> {
  if (roles.length !== 1 || roles[0] !== 'reader')
    throw new UsageError('--processes runs reader processes only (--roles reader); run the watcher and worker roles in a process of their own');
  checkReusePort(process.platform, process.version);
  const config = ctx.config();
  requireMarketplaceSecrets(config);
  const log = createLogger({ level: config.logLevel, async: true });
  // A private redis-server (no REDIS_URL) is started here once; the reader processes find it.
  const redis = await resolveRedis(config, { startPrivate: true, log: (m) => log.info(m) });
  const metricsPort = config.metricsPort;
  let readers;
  try {
    readers = await startReaderProcesses({
      count,
      script: process.argv[1]!,
      args: ['start', '--roles', 'reader', '--reuse-port'],
      env: ctx.env,
      // Each process's own /metrics listener: METRICS_PORT, METRICS_PORT + 1, ...
      envFor: (i, port) => ({
        ...(port === undefined ? {} : { PORT: String(port) }),
        ...(metricsPort === undefined || metricsPort === 0 ? {} : { METRICS_PORT: String(metricsPort + i) }),
      }),
      log,
    });
  } catch (err) {
    await redis.privateServer?.stop();
    throw err;
  }
  log.info({ roles, reader: readers.url, processes: count, pids: readers.pids() }, 'oddsfiles started');
  const r = readers;
  await untilStopped(log, async () => {
    await r.stop('SIGTERM');
    await redis.privateServer?.stop();
  });
  log.info('stopped');
  await flushLogger(log);
}

/**
 * Resolves once `close` has run after SIGINT/SIGTERM (or, `supervised`, once the supervisor is
 * gone). A second signal later than SAME_SIGNAL_MS exits at once.
 */
async function untilStopped(log: Logger, close: () => Promise<void>, supervised = false): Promise<void> {
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
      close().then(resolve, resolve);
    };
    // `on`, not `once`: a second signal must reach stop() too (with `once` it got the default
    // action, death by the signal, without the line above and without pino's final write).
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
    // A reader process whose supervisor is gone stops too.
    if (supervised) process.once('disconnect', () => stop('disconnect'));
  });
  // The same keypress's later copy (npm passes its signal on when it gets to it) must still
  // find the handler: arriving while the process exits, it would kill it with that signal.
  const sameUntil = (firstAt ?? 0) + SAME_SIGNAL_MS - performance.now();
  if (sameUntil > 0) await new Promise((resolve) => setTimeout(resolve, sameUntil));
}
