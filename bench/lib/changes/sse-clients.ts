/**
 * Lightweight clients of the change feed for the benches: a /v1/stream reader on a raw socket
 * (parses only the event frames, so thousands fit in one process), and a driver of
 * bench/lib/changes/sse-clients-child.ts, which holds many such streams, or many waiting long-polls of
 * /v1/changes, in a process of its own and reports their receive times (same clock: nowMs()).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT } from '../../../test/helpers/service.js';
import { onCleanup } from '../common/run.js';
import { nowMs } from '../common/stats.js';

/** `id:` (position), `event:`, `data:` of one frame (heartbeats and the retry frame are skipped). */
const FRAME = /id: (\d+)\nevent: (\S+)\ndata: ([^\n]*)\n/g;

export interface SseEvent {
  readonly id: number;
  readonly event: string;
  /** The raw JSON of the data line. */
  readonly data: string;
  /** When the chunk that completed it was read (nowMs()). */
  readonly at: number;
}

/** `id: ` as bytes, to count events in a chunk without decoding it. */
const ID = Buffer.from('id: ');

/**
 * One GET /v1/stream on a raw socket. `opened` settles on the response head (200 or an error).
 * Without `onEvent` the stream only keeps its last position and event count, found in the bytes
 * without decoding them: thousands of such streams cost their process little, which leaves the
 * shared cores to the reader being measured.
 */
export class SseSocket {
  readonly socket: Socket;
  readonly opened: Promise<void>;
  lastId = 0;
  events = 0;
  private buf = '';
  private head = true;
  /** Light streams: the end of the previous chunk, where an `id:` line may have been cut. */
  private tail: Buffer = Buffer.alloc(0);

  constructor(base: string, key: string, since: number | undefined, onEvent?: (e: SseEvent) => void) {
    const url = new URL(base);
    this.socket = connect({ host: url.hostname, port: Number(url.port), noDelay: true });
    // The base's query (e.g. `?conflate=1000`) is the stream's, with `since` added.
    const query = new URLSearchParams(url.search);
    if (since !== undefined) query.set('since', String(since));
    const path = `/v1/stream${query.size > 0 ? `?${query}` : ''}`;
    this.socket.write(`GET ${path} HTTP/1.1\r\nhost: ${url.host}\r\nx-api-key: ${key}\r\naccept: text/event-stream\r\n\r\n`);
    this.opened = new Promise((resolve, reject) => {
      this.socket.once('error', reject);
      this.socket.once('close', () => reject(new Error('stream closed before its head')));
      this.socket.on('data', (chunk: Buffer) => {
        const at = nowMs();
        if (!this.head && !onEvent) return this.count(chunk);
        this.buf += chunk.toString('latin1');
        if (this.head) {
          const end = this.buf.indexOf('\r\n\r\n');
          if (end < 0) return;
          const status = this.buf.slice(0, this.buf.indexOf('\r\n'));
          if (!/^HTTP\/1\.1 200 /.test(status)) {
            reject(new Error(`${status}: ${this.buf.slice(end + 4, end + 300)}`));
            this.socket.destroy();
            return;
          }
          this.head = false;
          const rest = this.buf.slice(end + 4);
          this.buf = '';
          resolve();
          if (!onEvent) return this.count(Buffer.from(rest, 'latin1'));
          this.buf = rest;
        }
        FRAME.lastIndex = 0;
        let last = 0;
        for (let m = FRAME.exec(this.buf); m; m = FRAME.exec(this.buf)) {
          last = FRAME.lastIndex;
          const id = Number(m[1]);
          if (id <= this.lastId) continue;
          this.lastId = id;
          this.events++;
          onEvent!({ id, event: m[2]!, data: m[3]!, at });
        }
        // Keep only what may start a frame not complete yet (heartbeats go).
        this.buf = this.buf.slice(last);
        if (this.buf.length > 8192) this.buf = this.buf.slice(-4096);
      });
    });
    this.opened.catch(() => undefined);
  }

  /** A light stream's chunk: count its `id:` lines and keep the last complete one. */
  private count(chunk: Buffer): void {
    const b = this.tail.length > 0 ? Buffer.concat([this.tail, chunk]) : chunk;
    let lastLine = -1;
    for (let i = b.indexOf(ID); i >= 0; i = b.indexOf(ID, i + ID.length)) {
      const eol = b.indexOf(10, i);
      if (eol < 0) break;
      lastLine = i;
      // A line already whole in the previous chunk was counted with it.
      if (eol >= this.tail.length) this.events++;
    }
    if (lastLine >= 0) {
      const id = Number(b.toString('latin1', lastLine + ID.length, b.indexOf(10, lastLine)));
      if (id > this.lastId) this.lastId = id;
    }
    this.tail = b.subarray(Math.max(0, b.length - 32));
  }

  close(): void {
    this.socket.destroy();
  }
}

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'sse-clients-child.ts');

export interface OpenResult {
  readonly opened: number;
  readonly failed: number;
  readonly error?: string;
}

export interface Waited {
  /** nowMs() of each answer's head; NaN for one not answered. */
  readonly at: number[];
  /** Answers that were 200 with at least one change. */
  readonly withChange: number;
}

/** A child process of SSE streams and long-polls, driven over IPC (one request at a time). */
export class ClientsChild {
  private constructor(private readonly child: ChildProcess) {}

  static async start(): Promise<ClientsChild> {
    const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    onCleanup(async () => {
      if (child.connected) child.disconnect();
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    });
    await new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code) => reject(new Error(`sse clients child exited (${code})`)));
    });
    return new ClientsChild(child);
  }

  get pid(): number {
    return this.child.pid!;
  }

  private call<T>(msg: Record<string, unknown>): Promise<T> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`sse clients child exited (${code}) during ${String(msg.cmd)}`));
      this.child.once('exit', onExit);
      this.child.once('message', (m: T) => {
        this.child.off('exit', onExit);
        resolve(m);
      });
      this.child.send(msg);
    });
  }

  /** Open `count` streams from `since`, `batch` at a time; every `sampleEvery`-th records receive times. */
  open(base: string, key: string, count: number, since: number, sampleEvery: number, batch = 100): Promise<OpenResult> {
    return this.call({ cmd: 'open', base, key, count, since, sampleEvery, batch });
  }

  /**
   * Latencies (receive − `t0` of its position) at the sampled streams for the positions given;
   * `missing`: sampled receipts of them that never came; `behind`: streams (of all) whose last
   * position is before the largest given. Forgets the receive times.
   */
  /** Receive time − `t0` of each sampled event (`[position, t0]`); the times are forgotten unless `keep`. */
  latencies(t0: [number, number][], keep = false): Promise<{ ms: number[]; missing: number; behind: number; events: number }> {
    return this.call({ cmd: 'latencies', t0, keep });
  }

  /** Send `count` GET /v1/changes?since=…&wait=… (one socket each), resolved once all are sent. */
  wait(base: string, key: string, count: number, since: number, waitS: number): Promise<{ sent: number }> {
    return this.call({ cmd: 'wait', base, key, count, since, waitS });
  }

  /** Once every long-poll of the last wait() is answered. */
  waited(): Promise<Waited> {
    return this.call({ cmd: 'waited' });
  }

  closeAll(): Promise<{ closed: number }> {
    return this.call({ cmd: 'close' });
  }
}
