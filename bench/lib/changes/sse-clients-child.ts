/**
 * The child process of bench/lib/changes/sse-clients.ts (never run by hand): holds many /v1/stream
 * connections (raw sockets) or waiting /v1/changes long-polls and reports when each event or
 * answer arrived, on the clock the parent uses (nowMs()).
 *
 * Messages in: open | latencies | wait | waited | close (see ClientsChild). Out: one reply each.
 */
import { connect, type Socket } from 'node:net';
import { SseSocket } from './sse-clients.js';
import { nowMs } from '../common/stats.js';

type Msg =
  | { cmd: 'open'; base: string; key: string; count: number; since: number; sampleEvery: number; batch: number }
  | { cmd: 'latencies'; t0: [number, number][]; keep?: boolean }
  | { cmd: 'wait'; base: string; key: string; count: number; since: number; waitS: number }
  | { cmd: 'waited' }
  | { cmd: 'close' };

const streams: SseSocket[] = [];
/** position → receive times at the sampled streams. */
let received = new Map<number, number[]>();
let sampled = 0;
let polls: Promise<{ at: number; change: boolean }>[] = [];

async function open(m: Extract<Msg, { cmd: 'open' }>): Promise<{ opened: number; failed: number; error?: string }> {
  let opened = 0;
  let failed = 0;
  let error: string | undefined;
  for (let i = 0; i < m.count; i += m.batch) {
    const batch: SseSocket[] = [];
    for (let j = i; j < Math.min(m.count, i + m.batch); j++) {
      const sample = (streams.length + batch.length) % m.sampleEvery === 0;
      if (sample) sampled++;
      batch.push(
        new SseSocket(
          m.base,
          m.key,
          m.since,
          sample
            ? (e) => {
                let at = received.get(e.id);
                if (!at) received.set(e.id, (at = []));
                at.push(e.at);
              }
            : undefined,
        ),
      );
    }
    const settled = await Promise.allSettled(batch.map((s) => s.opened));
    settled.forEach((r, k) => {
      if (r.status === 'fulfilled') {
        opened++;
        streams.push(batch[k]!);
      } else {
        failed++;
        error ??= String((r.reason as Error).message);
        batch[k]!.close();
      }
    });
  }
  return { opened, failed, ...(error ? { error } : {}) };
}

function latencies(t0: [number, number][], keep = false): { ms: number[]; missing: number; behind: number; events: number } {
  const ms: number[] = [];
  let missing = 0;
  for (const [id, t] of t0) {
    const at = received.get(id) ?? [];
    for (const a of at) ms.push(a - t);
    missing += sampled - at.length;
  }
  const last = Math.max(0, ...t0.map(([id]) => id));
  const behind = streams.filter((s) => s.lastId < last).length;
  const events = streams.reduce((n, s) => n + s.events, 0);
  if (!keep) received = new Map();
  return { ms, missing, behind, events };
}

/**
 * Long-polls on raw keep-alive sockets, one request at a time each (reused across rounds): the
 * answer's head time, and whether it carried a change. Parsing stays minimal (status line,
 * Content-Length, one search of the body) so that a thousand answers cost this process little.
 */
class PollSocket {
  private socket: Socket | undefined;
  private buf: Buffer = Buffer.alloc(0);
  private pending: ((r: { at: number; change: boolean }) => void) | undefined;
  private at = 0;

  constructor(private readonly url: URL) {}

  poll(path: string, key: string): Promise<{ at: number; change: boolean }> {
    if (!this.socket || this.socket.destroyed) {
      this.socket = connect({ host: this.url.hostname, port: Number(this.url.port), noDelay: true });
      this.socket.on('data', (c: Buffer) => this.onData(c));
      this.socket.on('error', () => this.settle({ at: Number.NaN, change: false }));
      this.socket.on('close', () => this.settle({ at: Number.NaN, change: false }));
    }
    this.buf = Buffer.alloc(0);
    this.at = 0;
    const answered = new Promise<{ at: number; change: boolean }>((resolve) => (this.pending = resolve));
    this.socket.write(`GET ${path} HTTP/1.1\r\nhost: ${this.url.host}\r\nx-api-key: ${key}\r\n\r\n`);
    return answered;
  }

  private onData(chunk: Buffer): void {
    if (this.at === 0) this.at = nowMs();
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const end = this.buf.indexOf('\r\n\r\n');
    if (end < 0) return;
    const head = this.buf.toString('latin1', 0, end);
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    if (this.buf.length < end + 4 + length) return;
    const ok = head.startsWith('HTTP/1.1 200 ');
    const change = ok && this.buf.indexOf('"changes":[{', end + 4) >= 0;
    this.settle({ at: this.at, change });
  }

  private settle(r: { at: number; change: boolean }): void {
    const p = this.pending;
    this.pending = undefined;
    p?.(r);
  }

  close(): void {
    this.socket?.destroy();
  }
}

const pollSockets: PollSocket[] = [];

async function handle(m: Msg): Promise<unknown> {
  switch (m.cmd) {
    case 'open':
      return open(m);
    case 'latencies':
      return latencies(m.t0, m.keep);
    case 'wait':
      while (pollSockets.length < m.count) pollSockets.push(new PollSocket(new URL(m.base)));
      polls = pollSockets.slice(0, m.count).map((p) => p.poll(`/v1/changes?since=${m.since}&wait=${m.waitS}`, m.key));
      return { sent: polls.length };
    case 'waited': {
      const r = await Promise.all(polls);
      return { at: r.map((x) => x.at), withChange: r.filter((x) => x.change).length };
    }
    case 'close': {
      const closed = streams.length;
      for (const s of streams.splice(0)) s.close();
      for (const p of pollSockets.splice(0)) p.close();
      sampled = 0;
      received = new Map();
      return { closed };
    }
  }
}

process.on('message', (m: Msg) => {
  handle(m).then(
    (r) => process.send!(r),
    (err: unknown) => process.send!({ error: String(err) }),
  );
});
process.on('disconnect', () => process.exit(0));
process.send!({ ready: true });
