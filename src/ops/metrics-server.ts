/**
 * A tiny /metrics listener (node:http, no Fastify) for processes that have no reader: a worker or
 * watcher process started with METRICS_PORT. Same guard as the reader's /metrics (ADMIN_TOKEN or
 * loopback only), same problem+json refusals. Also answers GET /healthz for liveness probes.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpProblem } from '../errors.js';
import type { Logger } from '../log.js';
import { PROBLEM_CONTENT_TYPE, problemPayload } from '../problem-json.js';
import { challenges, checkAdminAccess } from './admin-guard.js';
import type { Metrics } from './metrics.js';

export interface MetricsServerOptions {
  readonly metrics: Metrics;
  /** config.metricsPort (0: any free port). */
  readonly port: number;
  /** config.http.host: where to listen. */
  readonly host: string;
  /** config.adminToken. */
  readonly adminToken: string | undefined;
  readonly log?: Logger;
}

export interface RunningMetricsServer {
  /** e.g. http://127.0.0.1:9464 (the real port when port 0 was asked for). */
  readonly url: string;
  close(): Promise<void>;
}

function sendProblem(res: ServerResponse, problem: HttpProblem, extra: Record<string, string | string[]> = {}): void {
  const body = problemPayload(problem);
  res.writeHead(problem.status, {
    ...problem.headers,
    ...extra,
    'content-type': PROBLEM_CONTENT_TYPE,
    'cache-control': 'no-store',
    'content-length': body.length,
  });
  res.end(body);
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export async function startMetricsServer(options: MetricsServerOptions): Promise<RunningMetricsServer> {
  const { metrics, log } = options;
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const started = performance.now();
    const path = (req.url ?? '/').split('?', 1)[0];
    const method = req.method ?? 'GET';
    let route = 'unmatched';
    try {
      if (path === '/healthz') {
        route = '/healthz';
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end('{"status":"ok"}');
        return;
      }
      if (path !== '/metrics') {
        sendProblem(res, new HttpProblem('not_found', 'This listener serves GET /metrics and GET /healthz only.'));
        return;
      }
      route = '/metrics';
      if (method !== 'GET' && method !== 'HEAD') {
        sendProblem(res, new HttpProblem('method_not_allowed', `Only GET and HEAD are allowed here, not ${method}.`, { allow: 'GET, HEAD' }));
        return;
      }
      const decision = checkAdminAccess(options.adminToken, {
        method,
        authorization: header(req, 'authorization'),
        remoteAddress: req.socket.remoteAddress,
        // No proxy is trusted here: the client is the peer.
        clientIp: req.socket.remoteAddress,
        host: header(req, 'host'),
        origin: header(req, 'origin'),
        secFetchSite: header(req, 'sec-fetch-site'),
      });
      if (!decision.ok) {
        if (decision.reason === 'missing_token' || decision.reason === 'wrong_token') metrics.authFailed('admin_token');
        log?.warn({ route, ip: req.socket.remoteAddress, reason: decision.reason }, 'admin access refused');
        sendProblem(res, decision.problem, decision.problem.status === 401 ? { 'www-authenticate': challenges(decision.reason) } : {});
        return;
      }
      const body = await metrics.render();
      res.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store', 'content-length': Buffer.byteLength(body) });
      res.end(method === 'HEAD' ? undefined : body);
    } catch (err) {
      log?.error({ err: { message: (err as Error).message } }, 'metrics scrape failed');
      if (!res.headersSent) sendProblem(res, new HttpProblem('internal', 'The metrics could not be collected; it has been logged.'));
      else res.destroy();
    } finally {
      metrics.httpResponse(route, method, res.statusCode, performance.now() - started);
    }
  };

  const server = createServer({ requestTimeout: 10_000, headersTimeout: 5_000 }, (req, res) => void handle(req, res));
  server.on('clientError', (_err, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  log?.info({ url: `${url}/metrics` }, 'metrics listening');
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
