/**
 * The operator endpoints of a Fastify app: GET /metrics (Prometheus text), the BullMQ dashboard at
 * /admin/queues (bull-board, loaded on its first request: dashboard.ts; only when a queue is
 * given), both behind the admin guard, plus a root onResponse hook that counts every HTTP response
 * by route pattern, method and status.
 *
 * Call registerOps on the root instance before app.ready() (hooks cannot be added after), ideally
 * before the other routes: the hook then sees every route, the 404 handler included.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import { adminGuard, type AdminDenyReason } from './admin-guard.js';
import { DASHBOARD_PATH, registerDashboard, type QueueProvider } from './dashboard.js';
import type { Metrics } from './metrics.js';
import { UNMATCHED_ROUTE } from '../ports/route-labels.js';

export { DASHBOARD_PATH };
export const METRICS_PATH = '/metrics';

export interface OpsDeps {
  readonly config: Pick<Config, 'adminToken'>;
  readonly metrics: Metrics;
  /**
   * The ingest queue, or how to open it: the dashboard is mounted only when given, and loads
   * bull-board (and, with a provider, BullMQ) on its first request (dashboard.ts).
   */
  readonly queue?: QueueProvider;
  /**
   * Dashboard actions (retry, clean, pause, add job...). Off by default: a rejected drop's job
   * retried from the dashboard finds its file gone (rejected drops go back through the pipeline
   * with `oddsfiles rejected retry`), so the dashboard is a window, not a control panel.
   */
  readonly dashboardActions?: boolean;
  /** Count HTTP responses in oddsfiles_http_requests_total (default true). */
  readonly countHttp?: boolean;
}

export async function registerOps(app: FastifyInstance, deps: OpsDeps): Promise<void> {
  const { metrics } = deps;
  const onDenied = (reason: AdminDenyReason, _request: FastifyRequest) => {
    if (reason === 'missing_token' || reason === 'wrong_token') metrics.authFailed('admin_token');
  };
  const guard = adminGuard({ token: deps.config.adminToken, onDenied });

  if (deps.countHttp ?? true) {
    app.addHook('onResponse', (request, reply, done) => {
      metrics.httpResponse(request.routeOptions.url ?? UNMATCHED_ROUTE, request.method, reply.statusCode, reply.elapsedTime);
      done();
    });
  }

  app.get(METRICS_PATH, { onRequest: guard }, async (_request, reply) => {
    const body = await metrics.render();
    return reply.header('content-type', metrics.contentType).header('cache-control', 'no-store').send(body);
  });

  if (deps.queue) await registerDashboard(app, { queue: deps.queue, guard, actions: deps.dashboardActions ?? false });
}
