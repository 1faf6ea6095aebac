/**
 * The front door: GET and HEAD of `/v1/files` and `/v1/data/{name}` taken on Node's `request`
 * event and answered by the v1 handler without Fastify's request and reply objects or hook chain
 * (a consumer's poll is almost always exactly this request). It decides nothing itself: it only
 * picks the requests whose form needs no more of Fastify than routing, and sends what the handler
 * resolves, with the request line and the count every answer gets.
 *
 * Left to Fastify, whose /v1 routes call the same handler: other methods (405), no Host (400), a
 * body, HTTP/2, a query string or a percent-encoded or over-long name (Fastify's routing decodes
 * and bounds them), an overloaded process (503) and a closing one (`Connection: close`).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { HttpProblem } from '../../errors.js';
import { REQUEST_LINE_MSG, type Logger } from '../../log.js';
import { DATA_PREFIX, DATA_ROUTE, MAX_NAME_LENGTH } from './data-route.js';
import { FILES_PATH } from './files-route.js';
import { requestLine } from '../request-log.js';
import { problemReply, type V1Handler, type V1Reply } from './v1-handler.js';

export interface FrontDoorDeps {
  readonly handler: V1Handler;
  /** True while the app closes or sheds load: then Fastify answers. */
  readonly unavailable: () => boolean;
  readonly nextRequestId: () => string;
  readonly clientIp: (req: IncomingMessage) => string | undefined;
  readonly log: Logger;
  /** Responses below this status get no request line (request-log.ts). */
  readonly minLoggedStatus: number;
  /** Counts one response (route pattern, method, status, ms), as the app's onResponse hook does for Fastify's. */
  readonly observe?: ((route: string, method: string, status: number, durationMs: number) => void) | undefined;
}

export interface FrontDoor {
  /** Take `req` and return true, or return false having touched nothing. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** Requests taken since start (tests). */
  readonly answered: number;
}

const INTERNAL = problemReply(new HttpProblem('internal', 'The request could not be served; it has been logged.'));

export function createFrontDoor(deps: FrontDoorDeps): FrontDoor {
  const { handler, unavailable, nextRequestId, clientIp, log, minLoggedStatus, observe } = deps;
  let answered = 0;

  const send = (req: IncomingMessage, res: ServerResponse, route: string, start: number, r: V1Reply): void => {
    res.writeHead(r.status, r.headers as string[]);
    res.end(r.body);
    const ms = performance.now() - start;
    const method = req.method!;
    if (r.status >= minLoggedStatus) log.info(requestLine(nextRequestId(), method, req.url, r.status, ms, r.principal?.id, clientIp(req)), REQUEST_LINE_MSG);
    observe?.(route, method, r.status, ms);
  };

  return {
    handle(req, res) {
      const method = req.method;
      if ((method !== 'GET' && method !== 'HEAD') || req.httpVersionMajor !== 1) return false;
      const h = req.headers;
      if (h.host === undefined || (h['content-length'] !== undefined && h['content-length'] !== '0') || h['transfer-encoding'] !== undefined) return false;
      const url = req.url!;
      let route: string;
      let name: string | undefined;
      if (url === FILES_PATH) route = FILES_PATH;
      else if (url.startsWith(DATA_PREFIX) && url.length - DATA_PREFIX.length <= MAX_NAME_LENGTH && !/[%?#]/.test(url)) {
        route = DATA_ROUTE;
        name = url.slice(DATA_PREFIX.length);
      } else return false;
      if (unavailable()) return false;

      const start = performance.now();
      answered++;
      const r = handler.resolve(req, name);
      if (!(r instanceof Promise)) send(req, res, route, start, r);
      else
        r.then(
          (reply) => send(req, res, route, start, reply),
          (err: unknown) => {
            log.error({ err, method, url }, 'request failed');
            if (!res.headersSent) send(req, res, route, start, INTERNAL);
          },
        );
      return true;
    },
    get answered() {
      return answered;
    },
  };
}

/**
 * Put the front door in front of Fastify's handler on the server's request event. Fastify gives its
 * handler to the server it creates and adds no other request listener; anything else means this
 * is not the server it was written for, and every request stays with Fastify.
 */
export function routeThroughFrontDoor(app: FastifyInstance, door: FrontDoor): void {
  const server = app.server as unknown as Server;
  const listeners = server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  if (listeners.length !== 1) {
    app.log.warn({ listeners: listeners.length }, 'the front door is off: the server has an unexpected request listener');
    return;
  }
  const fastifyHandler = listeners[0]!;
  server.removeListener('request', fastifyHandler);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (!door.handle(req, res)) fastifyHandler(req, res);
  });
  frontDoors.set(app, door);
}

const frontDoors = new WeakMap<FastifyInstance, FrontDoor>();

/** How many requests the front door of `app` has taken (undefined: it has none). */
export function frontDoorAnswered(app: FastifyInstance): number | undefined {
  return frontDoors.get(app)?.answered;
}
