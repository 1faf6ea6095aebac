/** A GET /v1/stream written on a bare TCP socket, for tests of what a client does with its connection. */
import { connect, type Socket } from 'node:net';

export interface RawStream {
  readonly socket: Socket;
  /** Everything received so far, as text. */
  text(): string;
  /** Resolves once what was received matches `re`. */
  until(re: RegExp, timeoutMs?: number): Promise<void>;
  /** Resolves when the server has ended or closed the connection. */
  readonly ended: Promise<void>;
}

export function openRawStream(port: number, key: string, query = ''): RawStream {
  const socket = connect(port, '127.0.0.1');
  let received = '';
  const waiters = new Set<() => void>();
  let endedResolve!: () => void;
  const ended = new Promise<void>((r) => (endedResolve = r));
  socket.setEncoding('utf8');
  socket.on('data', (c: string) => {
    received += c;
    for (const w of waiters) w();
  });
  socket.on('end', () => endedResolve());
  socket.on('close', () => endedResolve());
  socket.on('error', () => undefined);
  socket.write(`GET /v1/stream${query} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${key}\r\nAccept: text/event-stream\r\n\r\n`);
  return {
    socket,
    text: () => received,
    ended,
    until: (re, timeoutMs = 10_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (!re.test(received)) return;
          done();
          resolve();
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`not received within ${timeoutMs} ms: ${re}; got ${JSON.stringify(received.slice(-400))}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      }),
  };
}
