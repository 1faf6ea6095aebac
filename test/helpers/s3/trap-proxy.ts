/**
 * An HTTP proxy in front of an S3 server (s3rver) that can hold one kind of request, so a test can
 * stop the service at an exact step of the publish without a hook in the code:
 * - hold a PUT of a version object before it reaches S3        → killed during the store write
 * - hold the answer to that PUT after S3 has stored the object → killed after the store write, before the commit
 * - hold the PUT of manifest.json                              → killed after the commit
 * - hold a DELETE of an evicted version                        → killed after the manifest, before the claim is removed
 * It can also answer S3 requests with 503 (the store refuses writes). Requests and answers are
 * otherwise passed through byte for byte (the Host header too, so SigV4 signatures still hold).
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TrapSpec {
  readonly method: 'PUT' | 'GET' | 'DELETE';
  /** Matched against the request path, e.g. /bucket/oddsfiles/objects/<file>/<sha>.json */
  readonly path: RegExp;
  /** Hold before forwarding, or forward and hold the answer. */
  readonly when: 'before-forward' | 'after-answer';
}

export interface HeldRequest {
  readonly method: string;
  readonly path: string;
  /** S3's status, for after-answer traps. */
  readonly upstreamStatus?: number;
}

export interface TrapProxy {
  /** `http://127.0.0.1:<port>`: give it as S3_ENDPOINT. */
  readonly endpoint: string;
  /** Hold every request matching spec from now on; resolves with the first one held. */
  arm(spec: TrapSpec): Promise<HeldRequest>;
  /** Stop holding; held requests are dropped (their sockets destroyed). */
  disarm(): void;
  /** Answer requests matching `match` with 503 SlowDown until cleared (undefined). */
  fail(match: ((method: string, path: string) => boolean) | undefined): void;
  /** Every request seen, as "METHOD path status". */
  readonly log: string[];
  close(): Promise<void>;
}

export async function startTrapProxy(upstream: string): Promise<TrapProxy> {
  const target = new URL(upstream);
  let trap: { spec: TrapSpec; resolve: (h: HeldRequest) => void; first: boolean } | undefined;
  let failing: ((method: string, path: string) => boolean) | undefined;
  const held = new Set<ServerResponse>();
  const log: string[] = [];

  const readBody = (req: IncomingMessage) =>
    new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => resolve(Buffer.concat(chunks)));
      req.on('error', reject);
    });

  const hold = (res: ServerResponse, h: HeldRequest) => {
    held.add(res);
    res.on('close', () => held.delete(res));
    if (trap?.first) {
      trap.first = false;
      trap.resolve(h);
    }
  };

  const server: Server = createServer((req, res) => {
    void (async () => {
      const method = req.method ?? 'GET';
      const path = req.url ?? '/';
      const body = await readBody(req);
      if (failing?.(method, path)) {
        log.push(`${method} ${path} 503`);
        res.writeHead(503, { 'content-type': 'application/xml' });
        res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>');
        return;
      }
      const matches = trap !== undefined && trap.spec.method === method && trap.spec.path.test(path);
      if (matches && trap!.spec.when === 'before-forward') {
        log.push(`${method} ${path} held`);
        hold(res, { method, path });
        return;
      }
      const up = httpRequest({ host: target.hostname, port: target.port, method, path, headers: req.headers }, (upRes) => {
        void (async () => {
          const answer = await readBody(upRes);
          log.push(`${method} ${path} ${upRes.statusCode}`);
          if (matches && trap) {
            hold(res, { method, path, upstreamStatus: upRes.statusCode });
            return;
          }
          res.writeHead(upRes.statusCode ?? 502, upRes.headers);
          res.end(answer);
        })().catch(() => res.destroy());
      });
      up.on('error', () => res.destroy());
      up.end(body);
    })().catch(() => res.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;

  const release = () => {
    for (const res of held) res.destroy();
    held.clear();
  };

  return {
    endpoint: `http://127.0.0.1:${port}`,
    arm(spec) {
      release();
      return new Promise<HeldRequest>((resolve) => {
        trap = { spec, resolve, first: true };
      });
    },
    disarm() {
      trap = undefined;
      release();
    },
    fail(match) {
      failing = match;
    },
    log,
    async close() {
      trap = undefined;
      release();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
