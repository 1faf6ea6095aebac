/**
 * Where a stream's bytes go once its head is written. Over HTTP/1.1 (plain or TLS) the stream
 * takes its socket from the HTTP server, as Node does for an upgraded connection: the server's
 * listeners and parser are released, the response is detached, and the stream keeps the socket
 * and nothing more of the request. Its body has no chunk framing and ends with the connection
 * (`Connection: close`). What the client sends after its request is read and dropped; its
 * half-close ends the stream. Over HTTP/2 (or where the socket cannot be taken) the response
 * itself is the sink: one more layer per write, the same bytes; a stream its client resets ends
 * at once.
 */
import type { ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

export interface StreamSink {
  /** Queue `chunk`; the caller checks `writableLength` against its bound. */
  write(chunk: Buffer | string): void;
  /** Bytes written but not yet taken by the kernel. */
  readonly writableLength: number;
  /** `fn` once what is queued has been taken. */
  onceDrain(fn: () => void): void;
  /** `fn` once the connection is gone (at once if it is); `byServer` when `end` closed it. */
  onClose(fn: (byServer: boolean) => void): void;
  /** Gone (closed, or ended by `end`). */
  readonly closed: boolean;
  /** Write `last` (if any), then close; a client that reads nothing is cut after END_GRACE_MS. */
  end(last?: string): void;
}

/** How long an ended stream's client has to read what is left. */
const END_GRACE_MS = 5000;

const HEAD = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  'x-accel-buffering': 'no',
};

/** The HTTP server's own listeners on a connection's socket (node:_http_server), by name. */
const SERVER_LISTENERS = new Set([
  'bound socketOnData',
  'bound socketOnEnd',
  'bound socketOnClose',
  'bound socketOnDrain',
  'socketOnError',
  'socketOnTimeout',
  'onSocketResume',
  'onSocketPause',
]);
const SERVER_EVENTS = ['data', 'end', 'close', 'drain', 'error', 'timeout', 'resume', 'pause'] as const;

type FreeParser = (parser: unknown, req: unknown, socket: unknown) => void;
/** Node's own release of a connection's parser (what an upgrade does); absent on a Node without it. */
const freeParser = (() => {
  try {
    const f = (createRequire(import.meta.url)('node:_http_common') as { freeParser?: unknown }).freeParser;
    return typeof f === 'function' ? (f as FreeParser) : undefined;
  } catch {
    return undefined;
  }
})();

/** Write the stream's head on `res` (its other headers set already) and return where its events go. */
export function openStreamSink(res: ServerResponse): StreamSink {
  const socket = res.socket;
  const http1 = res.req.httpVersionMajor === 1 && socket !== null;
  if (http1) res.useChunkedEncodingByDefault = false;
  res.writeHead(200, HEAD);
  res.flushHeaders();
  if (http1 && takeSocket(res, socket)) return new SocketSink(socket);
  return responseSink(res);
}

/** Take `socket` from the HTTP server (the head is on it already); false where it cannot be. */
function takeSocket(res: ServerResponse, socket: Socket): boolean {
  const { parser, _httpMessage: current } = socket as Socket & { parser?: unknown; _httpMessage?: unknown };
  // The head must be on the socket already: the socket serves this response now.
  if (freeParser === undefined || parser == null || current !== res || res.destroyed) return false;
  for (const ev of SERVER_EVENTS) for (const l of socket.listeners(ev)) if (SERVER_LISTENERS.has(l.name)) socket.removeListener(ev, l as () => void);
  freeParser(parser, res.req, socket);
  res.detachSocket(socket);
  // A stream has its own liveness (heartbeats, the slow-client bound): no idle timer, which every
  // write would otherwise re-arm.
  socket.setTimeout(0);
  return true;
}

const SINK = Symbol('stream sink');
type SinkSocket = Socket & { [SINK]?: SocketSink };

// The socket's listeners, shared by every stream: a stream holds no closures of its own.
function onSocketClose(this: SinkSocket): void {
  this[SINK]?.gone();
}
function onSocketEnd(this: SinkSocket): void {
  // The client half-closed: it asks for nothing more, so the stream ends.
  this[SINK]?.endedByClient();
}
function onSocketError(): void {
  // Followed by 'close'.
}

/** The sink of a socket taken from the HTTP server. */
class SocketSink implements StreamSink {
  private ended = false;
  private byClient = false;
  private readonly onClosed = new CloseListeners();

  constructor(private readonly socket: SinkSocket) {
    socket[SINK] = this;
    socket.on('error', onSocketError);
    socket.once('close', onSocketClose);
    socket.once('end', onSocketEnd);
    // Bytes after the request are read and dropped (flowing, with no data listener).
    socket.resume();
    if (socket.closed) this.gone();
  }

  write(chunk: Buffer | string): void {
    this.socket.write(chunk);
  }
  get writableLength(): number {
    return this.socket.writableLength;
  }
  onceDrain(fn: () => void): void {
    this.socket.once('drain', fn);
  }
  onClose(fn: (byServer: boolean) => void): void {
    this.onClosed.add(fn);
  }
  get closed(): boolean {
    return this.ended || this.onClosed.fired;
  }
  end(last?: string): void {
    if (this.ended || this.onClosed.fired) return;
    this.ended = true;
    if (last !== undefined) this.socket.end(last);
    else this.socket.end();
    cutLater(this.socket);
  }
  endedByClient(): void {
    this.byClient = !this.ended;
    this.end();
  }
  gone(): void {
    this.socket[SINK] = undefined;
    this.onClosed.fire(this.ended && !this.byClient);
  }
}

function responseSink(res: ServerResponse): StreamSink {
  const onClose = new CloseListeners();
  let ended = false;
  res.once('close', () => onClose.fire(ended));
  if (res.closed) onClose.fire(false);
  // HTTP/2: a stream its client reset with NO_ERROR is only aborted, and closes once what was
  // queued on it has been written, which may be never: the client has gone, so it ends now.
  const h2 = (res as { stream?: Duplex }).stream;
  h2?.once('aborted', () => h2.destroy());
  return {
    write: (chunk) => void res.write(chunk),
    get writableLength() {
      return res.writableLength;
    },
    onceDrain: (fn) => void res.once('drain', fn),
    onClose: (fn) => onClose.add(fn),
    get closed() {
      return ended || res.destroyed;
    },
    end(last) {
      if (ended || res.destroyed) return;
      ended = true;
      if (last !== undefined) res.end(last);
      else res.end();
      cutLater(res);
    },
  };
}

/** Who is told of the close: once each, also when added after it. */
class CloseListeners {
  private fns: ((byServer: boolean) => void)[] = [];
  private result: boolean | undefined;

  add(fn: (byServer: boolean) => void): void {
    if (this.result === undefined) this.fns.push(fn);
    else fn(this.result);
  }
  fire(byServer: boolean): void {
    if (this.result !== undefined) return;
    this.result = byServer;
    for (const fn of this.fns.splice(0)) fn(byServer);
  }
  get fired(): boolean {
    return this.result !== undefined;
  }
}

/** A client that reads nothing never lets the end through: it has a few seconds, no more. */
function cutLater(target: Socket | ServerResponse): void {
  const t = setTimeout(() => target.destroy(), END_GRACE_MS);
  t.unref();
  target.once('close', () => clearTimeout(t));
}
