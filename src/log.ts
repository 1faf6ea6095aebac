/**
 * Logging with pino: JSON lines, one per event; pretty when a terminal is attached. The API key
 * header and anything that may hold a secret are redacted at the source.
 *
 * `async: true` (the `start` command, when stdout is not a terminal): lines go through a buffered
 * asynchronous destination (pino.destination, sync: false) instead of one write(2) per line.
 * Request lines (REQUEST_LINE_MSG below warn, one per request: reader/request-log.ts) are written
 * in blocks of 16 KiB, or within a second when traffic is low; every other line is written at once
 * (asynchronously), so operational lines are not held back. Whatever is buffered is written
 * synchronously when the process exits, also on a crash (pino registers a flushSync on the
 * process 'exit' event for such destinations; pino.final is gone since pino 7), and
 * `logger.fatal` always writes synchronously. Only a SIGKILL or a power cut loses the buffer
 * (at most 16 KiB or one second of request lines). At an exit while an asynchronous write is under
 * way, the last lines may come out before that write's (pino's exit handler cannot wait for it).
 */
import { pino, type Logger, type LoggerOptions as PinoOptions } from 'pino';
import { scrubKeys } from './keys/secret.js';

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

/**
 * Paths whose whole query string is withheld from logs: the operator endpoints, where a client may
 * put the admin token in the address (`/metrics?token=…`). Matched on the decoded path, lowercased,
 * with repeated slashes collapsed, so that no spelling of the path slips through.
 */
const SECRET_QUERY_PATHS = ['/metrics', '/admin'];
/** Query parameters whose value is withheld from logs on every route (names compared decoded, lowercased). */
const SECRET_PARAMS = new Set(['token', 'key', 'api_key', 'apikey', 'api-key', 'x-api-key', 'access_token']);
const REDACTED = '[redacted]';

/**
 * A request URL as it may be logged: the query of an operator path replaced whole
 * (`/metrics?[redacted]`), the values of `token`, `key`, `api_key` (and their usual spellings)
 * replaced on every other path, and anything shaped like an API key replaced wherever it is.
 */
export function scrubUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return scrubKeys(url);
  const path = url.slice(0, q);
  if (isSecretQueryPath(path)) return `${scrubKeys(path)}?${REDACTED}`;
  const params = url
    .slice(q + 1)
    .split('&')
    .map((part) => {
      const eq = part.indexOf('=');
      const name = eq < 0 ? part : part.slice(0, eq);
      return SECRET_PARAMS.has(decodeLoosely(name).toLowerCase()) ? `${name}=${REDACTED}` : part;
    });
  return scrubKeys(`${path}?${params.join('&')}`);
}

function isSecretQueryPath(path: string): boolean {
  const p = decodeLoosely(path).toLowerCase().replace(/\/+/g, '/');
  return SECRET_QUERY_PATHS.some((prefix) => p === prefix || p.startsWith(`${prefix}/`) || p.startsWith(`${prefix}?`));
}

/** Percent-decoding (`+` as a space, as in a query) that never throws on a malformed escape. */
function decodeLoosely(text: string): string {
  const plain = text.replace(/\+/g, ' ');
  if (!plain.includes('%')) return plain;
  try {
    return decodeURIComponent(plain);
  } catch {
    return plain.replace(/%([0-9a-f]{2})/gi, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
}

/** The message of the per-request line: the only lines an asynchronous logger holds back. */
export const REQUEST_LINE_MSG = 'request';

/**
 * How much an asynchronous logger buffers, and how long at most (ms). 16 KiB: each block is a
 * write on the thread pool, and each wakes a pool thread; fewer, larger blocks take kernel time
 * off a busy reader's requests, and more than 16 KiB gained nothing (docs/BENCHMARKS.md,
 * measurements behind design choices).
 */
const ASYNC_MIN_LENGTH = 16 * 1024;
const ASYNC_FLUSH_EVERY_MS = 1000;
/** sonic-boom's largest single write; its minLength must stay below it. */
const ASYNC_MAX_WRITE = 64 * 1024;
const WARN = 40;
/** pino writes a fatal line synchronously itself. */
const FATAL = 60;

export interface LoggerOptions {
  readonly level: string;
  readonly name?: string;
  /** Pretty output (pino-pretty); default: when stdout is a terminal. */
  readonly pretty?: boolean;
  /** Where the JSON lines go instead of stdout (tests). */
  readonly destination?: NodeJS.WritableStream;
  /** Buffered asynchronous stdout (see above); only when not pretty, without `destination`, and stdout is not a terminal. */
  readonly async?: boolean;
}

export function createLogger(options: LoggerOptions): Logger {
  const pretty = options.pretty ?? Boolean(process.stdout.isTTY);
  const base: PinoOptions = {
    level: options.level,
    name: options.name ?? 'oddsfiles',
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: isoTimeOncePerMs(),
  };
  if (pretty && !options.destination) {
    return pino({ ...base, transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } });
  }
  if (options.destination) return pino(base, options.destination as pino.DestinationStream);
  if (options.async && !process.stdout.isTTY) return asyncLogger(base);
  return pino(base);
}

/**
 * pino's isoTime (`,"time":"<ISO 8601>"`), with the string made once per millisecond: at the
 * reader's request rate (ten or more lines per ms) toISOString showed in its CPU profile.
 */
function isoTimeOncePerMs(): () => string {
  let lastMs = Number.NaN;
  let text = '';
  return () => {
    const now = Date.now();
    if (now !== lastMs) {
      lastMs = now;
      text = `,"time":"${new Date(now).toISOString()}"`;
    }
    return text;
  };
}

function asyncLogger(base: PinoOptions): Logger {
  // Buffer mode: each line goes in as a Buffer of its own. In its default string mode sonic-boom
  // appends lines to one string and takes that string's UTF-8 byte length on every write, so each
  // line cost a scan of everything still pending.
  const dest = pino.destination({
    dest: 1,
    sync: false,
    minLength: ASYNC_MIN_LENGTH,
    periodicFlush: ASYNC_FLUSH_EVERY_MS,
    contentMode: 'buffer',
    maxWrite: ASYNC_MAX_WRITE,
  });
  // A line that must not wait: write the buffer now, or, when a write is under way (flush does
  // nothing then), as soon as it is done.
  let wanted = false;
  dest.on('drain', () => {
    if (!wanted) return;
    wanted = false;
    dest.flush();
  });
  const promptly = () => {
    wanted = true;
    dest.flush();
  };
  // What pino writes to: its lines (strings) handed over as Buffers. `dest.write` is looked up on
  // each call: pino replaces it with a no-op after EPIPE (stdout's reader gone).
  const stream: pino.DestinationStream & { flush(cb?: (err?: Error) => void): void; flushSync(): void } = {
    write: (line: string) => dest.write(Buffer.from(line) as unknown as string),
    flush: (cb) => dest.flush(cb),
    flushSync: () => dest.flushSync(),
  };
  return pino(
    {
      ...base,
      hooks: {
        logMethod(args, method, level) {
          method.apply(this, args);
          if (level < FATAL && (level >= WARN || args[args.length - 1] !== REQUEST_LINE_MSG)) promptly();
        },
      },
    },
    stream,
  );
}

/** Write what the logger buffers and wait for it (at most `timeoutMs`); never rejects. */
export function flushLogger(log: Logger, timeoutMs = 1000): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    timer.unref();
    try {
      log.flush(() => {
        clearTimeout(timer);
        resolve();
      });
    } catch {
      clearTimeout(timer);
      resolve();
    }
  });
}
