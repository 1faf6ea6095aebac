/**
 * A TCP pass-through on 127.0.0.1 in front of a server (here: s3rver) that a test can close and
 * open again on the same port: closed, every connection is cut and new ones are refused, as when
 * the server's host is unreachable; the server itself and its data are untouched.
 */
import { once } from 'node:events';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

export interface TcpGate {
  /** `http://127.0.0.1:<port>`: use it instead of the target's address. */
  readonly url: string;
  readonly isOpen: boolean;
  /** Cut every connection and refuse new ones. */
  close(): Promise<void>;
  /** Accept connections again, on the same port. */
  open(): Promise<void>;
  /** Close for good. */
  stop(): Promise<void>;
}

export async function startTcpGate(target: string): Promise<TcpGate> {
  const { hostname, port: targetPort } = new URL(target);
  const sockets = new Set<Socket>();
  const track = (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  };
  const makeServer = () =>
    createServer((client) => {
      const upstream = createConnection({ host: hostname, port: Number(targetPort) });
      track(client);
      track(upstream);
      client.pipe(upstream);
      upstream.pipe(client);
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.once('error', end).once('close', end);
      upstream.once('error', end).once('close', end);
    });

  let server: Server | undefined = makeServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;

  const close = async () => {
    const s = server;
    if (!s) return;
    server = undefined;
    const closed = new Promise<void>((r) => s.close(() => r()));
    for (const sock of sockets) sock.destroy();
    await closed;
  };

  return {
    url: `http://127.0.0.1:${port}`,
    get isOpen() {
      return server !== undefined;
    },
    close,
    async open() {
      if (server) return;
      const s = makeServer();
      s.listen(port, '127.0.0.1');
      await once(s, 'listening');
      server = s;
    },
    stop: close,
  };
}
