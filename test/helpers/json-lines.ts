import type { Readable } from 'node:stream';

/** Calls `each` with every line of `stream` parsed as JSON, or as `fallback(line)` when it is not JSON. */
export function onJsonLines<T>(stream: Readable, fallback: (line: string) => T, each: (value: T) => void): void {
  let buf = '';
  stream.setEncoding('utf8').on('data', (chunk: string) => {
    buf += chunk;
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      let value: T;
      try {
        value = JSON.parse(line) as T;
      } catch {
        value = fallback(line);
      }
      each(value);
    }
  });
}
