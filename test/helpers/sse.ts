/** A server-sent events client over node:http for tests: parses frames and waits for them. */
import { request, type IncomingMessage } from 'node:http';

export interface SseEvent {
  readonly id: string | undefined;
  readonly event: string;
  readonly data: string;
}

export interface SseClient {
  readonly status: number;
  readonly headers: IncomingMessage['headers'];
  readonly events: SseEvent[];
  /** Comment lines (heartbeats) seen. */
  readonly comments: number;
  readonly retry: number | undefined;
  /** Resolves with the first event (from `from` on) that `pred` accepts. */
  next(pred?: (e: SseEvent) => boolean, timeoutMs?: number, from?: number): Promise<SseEvent>;
  /** Resolves when the server ends the stream. */
  readonly ended: Promise<void>;
  close(): void;
}

export function openSse(url: string, headers: Record<string, string>): Promise<SseClient> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => {
      const events: SseEvent[] = [];
      const waiters = new Set<() => void>();
      let comments = 0;
      let retry: number | undefined;
      let buf = '';
      let endedResolve!: () => void;
      const ended = new Promise<void>((r) => (endedResolve = r));
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let id: string | undefined;
          let event = 'message';
          const data: string[] = [];
          let any = false;
          for (const line of frame.split('\n')) {
            if (line.startsWith(':')) comments++;
            else if (line.startsWith('retry: ')) retry = Number(line.slice(7));
            else if (line.startsWith('id: ')) id = line.slice(4);
            else if (line.startsWith('event: ')) event = line.slice(7);
            else if (line.startsWith('data: ')) data.push(line.slice(6));
            else continue;
            if (!line.startsWith(':') && !line.startsWith('retry: ')) any = true;
          }
          if (any) events.push({ id, event, data: data.join('\n') });
        }
        for (const w of waiters) w();
      });
      res.on('end', () => endedResolve());
      res.on('close', () => {
        endedResolve();
        for (const w of waiters) w();
      });
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        events,
        get comments() {
          return comments;
        },
        get retry() {
          return retry;
        },
        ended,
        next(pred = () => true, timeoutMs = 10_000, from = 0) {
          return new Promise((ok, fail) => {
            const check = () => {
              const hit = events.slice(from).find(pred);
              if (hit) {
                done();
                ok(hit);
              }
            };
            const timer = setTimeout(() => {
              done();
              fail(new Error(`no such event within ${timeoutMs} ms; got ${JSON.stringify(events.slice(-5))}`));
            }, timeoutMs);
            const done = () => {
              clearTimeout(timer);
              waiters.delete(check);
            };
            waiters.add(check);
            check();
          });
        },
        close: () => req.destroy(),
      });
    });
    req.on('error', reject);
    req.end();
  });
}
