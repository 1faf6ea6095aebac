/** A real pino logger (the service's createLogger) whose JSON lines the test can read back. */
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/log.js';

export type LogLine = Record<string, unknown> & { msg?: string };

export function capturingLogger(level = 'info'): { log: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const log = createLogger({
    level,
    pretty: false,
    destination: new Writable({
      write(chunk: Buffer, _e, cb) {
        for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line) as LogLine);
        cb();
      },
    }),
  });
  return { log, lines };
}
