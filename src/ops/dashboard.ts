/**
 * The BullMQ dashboard (bull-board) at /admin/queues, loaded on its first request: bull-board,
 * BullMQ and their web stack (@fastify/static, @fastify/view, ejs) cost a reader megabytes of RSS
 * that it never needs until an operator opens the dashboard.
 *
 * The routes under /admin/queues are registered up front (Fastify cannot add routes once ready),
 * behind the caller's guard; the first request builds a private Fastify instance that holds
 * bull-board and is never listened on, and every request is handed to it with inject(). The
 * answers are bull-board's own, byte for byte, minus the hop-by-hop headers.
 *
 * Redis away, the queue's connection holds its commands until Redis is back (stopped) or answers
 * nothing (paused): a request without an answer within answerTimeoutMs gets 503 + Retry-After; the
 * late answer, if any, is dropped.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { fastify, type FastifyInstance, type FastifyReply, type FastifyRequest, type HTTPMethods, type onRequestHookHandler } from 'fastify';
import type { Queue } from 'bullmq';
import { HttpProblem } from '../errors.js';
import { TimeoutError, withTimeout } from '../timeout.js';
import { jobData, jobTitle, type JobFields } from './dashboard-format.js';

export const DASHBOARD_PATH = '/admin/queues';

/** The queue (any BullMQ Queue), or how to open it (called once, on the first dashboard request). */
export type QueueProvider = Queue | (() => Promise<Queue>);

export interface DashboardDeps {
  readonly queue: QueueProvider;
  /** Runs before every dashboard request (the admin guard). */
  readonly guard: onRequestHookHandler;
  /** Retry, clean, pause... (off: a window, not a control panel). */
  readonly actions: boolean;
  /** How long a request waits for bull-board's answer before 503 (default DASHBOARD_TIMEOUT_MS). */
  readonly answerTimeoutMs?: number;
}

/** How long a dashboard request waits for bull-board (and the queue behind it) before answering 503. */
export const DASHBOARD_TIMEOUT_MS = 5000;
const RETRY_AFTER = { 'retry-after': '5' };

/** HEAD comes with GET (Fastify's exposeHeadRoutes). */
const METHODS: HTTPMethods[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
/** Headers that describe one hop's connection or framing: recomputed on each side, never copied. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'date', 'content-length']);
/**
 * Set by the inner instance on its own not-found and error answers, so that the reader answers
 * those as it answers everything else (problem+json, its 404), as when bull-board ran inside it.
 */
const INNER_OUTCOME = 'x-oddsfiles-dashboard-outcome';

/**
 * Put first in the dashboard's page. Opened as http://user:TOKEN@host/admin/queues, the page's
 * address keeps those credentials, and browsers refuse every scripted request (fetch) made
 * relative to such an address: bull-board could load neither its labels (locale files) nor the
 * queues. The page loads itself again without them; the browser has kept them for the folder, so
 * its requests still carry the token.
 */
const DROP_URL_CREDENTIALS = `<script>(function(){var u=document.URL,c=u.replace(/^([a-z][a-z0-9+.-]*:\\/\\/)[^\\/?#]*@/i,'$1');if(c!==u)location.replace(c)})()</script>`;

function withoutUrlCredentials(html: Buffer): Buffer {
  const text = html.toString('utf8');
  const at = text.search(/<head[^>]*>/i);
  if (at < 0) return html;
  const end = text.indexOf('>', at) + 1;
  return Buffer.from(text.slice(0, end) + DROP_URL_CREDENTIALS + text.slice(end), 'utf8');
}

function endToEnd(headers: Record<string, string | string[] | number | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = typeof value === 'number' ? String(value) : value;
  }
  return out;
}

export async function registerDashboard(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  let inner: Promise<FastifyInstance> | undefined;
  const open = (): Promise<FastifyInstance> => {
    inner ??= buildBoard(deps).catch((err: unknown) => {
      inner = undefined; // the next request tries again (e.g. Redis was away)
      throw err;
    });
    return inner;
  };

  /** bull-board's answer to `request` (its body and headers read now, before any wait). */
  const ask = async (request: FastifyRequest) => {
    const asked = {
      method: request.method as HTTPMethods,
      url: request.url,
      // The body was parsed here and is serialized again: its length is the inner request's own.
      headers: endToEnd(request.headers),
      ...(request.body !== undefined ? { payload: request.body as string | object } : {}),
    };
    const board = await open().catch((err: unknown) => {
      request.log.warn({ err: { message: (err as Error).message } }, 'the queue dashboard could not be opened');
      throw new HttpProblem('unavailable', 'The queue dashboard cannot reach the queue right now; retry in a moment.', RETRY_AFTER);
    });
    return board.inject(asked);
  };

  const timeoutMs = deps.answerTimeoutMs ?? DASHBOARD_TIMEOUT_MS;
  const forward = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const res = await withTimeout(ask(request), timeoutMs, 'the queue dashboard').catch((err: unknown) => {
      if (!(err instanceof TimeoutError)) throw err;
      // An action (POST...) may still be carried out once Redis answers: it is not sent again.
      const action = request.method === 'GET' || request.method === 'HEAD' ? '' : ' An action sent may still be carried out once Redis answers.';
      throw new HttpProblem(
        'unavailable',
        `The queue dashboard got no answer from the queue within ${timeoutMs / 1000} s (is Redis reachable?); retry in a moment.${action}`,
        RETRY_AFTER,
      );
    });
    const outcome = res.headers[INNER_OUTCOME];
    if (outcome === 'not-found') {
      reply.callNotFound();
      return reply;
    }
    if (outcome === 'error') throw Object.assign(new Error(res.body), { statusCode: res.statusCode });
    reply.headers(endToEnd(res.headers));
    const html = String(res.headers['content-type'] ?? '').startsWith('text/html') && res.statusCode === 200;
    return reply.code(res.statusCode).send(html ? withoutUrlCredentials(res.rawPayload) : res.rawPayload);
  };

  // An encapsulated context: the guard applies to these routes only.
  await app.register(async (scope) => {
    scope.addHook('onRequest', deps.guard);
    scope.route({ method: METHODS, url: DASHBOARD_PATH, handler: forward });
    scope.route({ method: METHODS, url: `${DASHBOARD_PATH}/*`, handler: forward });
  });
  app.addHook('onClose', async () => {
    const board = await inner?.catch(() => undefined);
    await board?.close();
  });
}

async function buildBoard(deps: DashboardDeps): Promise<FastifyInstance> {
  // One module graph per turn of the loop: loaded at once, they held every other request for
  // their whole evaluation (about 200 ms); so, for the largest one's.
  const queue = await (typeof deps.queue === 'function' ? deps.queue() : deps.queue);
  await nextTurn();
  const { createBullBoard } = await import('@bull-board/api');
  await nextTurn();
  const { BullMQAdapter } = await import('@bull-board/api/bullMQAdapter');
  await nextTurn();
  const { FastifyAdapter } = await import('@bull-board/fastify');
  await nextTurn();
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(DASHBOARD_PATH);
  const ingest = new BullMQAdapter(queue, {
    readOnlyMode: !deps.actions,
    allowRetries: deps.actions,
    description: 'drops waiting to be validated and published',
  });
  // Jobs titled by filename and outcome (a rejection marked, with its reason), times readable.
  ingest.setFormatter('name', (job: JobFields) => jobTitle(job));
  ingest.setFormatter('data', jobData);
  createBullBoard({
    queues: [ingest],
    serverAdapter,
    options: { uiConfig: { boardTitle: 'oddsfiles' } },
  });
  const board = fastify({ logger: false });
  board.setNotFoundHandler((_request, reply) => reply.code(404).header(INNER_OUTCOME, 'not-found').send());
  board.setErrorHandler((err: { statusCode?: number; message: string }, _request, reply) =>
    reply
      .code(err.statusCode !== undefined && err.statusCode >= 400 ? err.statusCode : 500)
      .header(INNER_OUTCOME, 'error')
      .send(err.message),
  );
  await nextTurn();
  await board.register(serverAdapter.registerPlugin(), { prefix: DASHBOARD_PATH });
  await nextTurn();
  await board.ready();
  return board;
}
