/**
 * Logging with pino: JSON lines, one per event; pretty when a terminal is attached. The API key
 * header and anything that may hold a secret are redacted at the source.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

export const REDACT_PATHS = [
  'req.headers["x-api-key"]',
  'req.headers.authorization',
  'req.headers["x-rapidapi-proxy-secret"]',
  'req.headers.cookie',
  'headers["x-api-key"]',
  'headers.authorization',
  'key',
  'apiKey',
  'secret',
];

export function createLogger(options: { level: string; name?: string; pretty?: boolean; destination?: NodeJS.WritableStream }): Logger {
  const pretty = options.pretty ?? Boolean(process.stdout.isTTY);
  const base = {
    level: options.level,
    name: options.name ?? 'oddsfiles',
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (pretty && !options.destination) {
    return pino({ ...base, transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } });
  }
  return options.destination ? pino(base, options.destination as pino.DestinationStream) : pino(base);
}
