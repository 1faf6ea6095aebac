/**
 * Fastify's request logging, reduced to one line per request written when the response is done:
 * method, URL (secrets scrubbed: scrubUrl in log.ts), status, time, key id. Never the key: the headers
 * are not logged, and the logger redacts X-API-Key (REDACT_PATHS) should anything log them. The
 * front door (front-door.ts) writes the same line for the requests it carries (requestLine,
 * minLoggedStatus, and the request ids of createRequestIds, which Fastify uses too), and so does
 * the edge (edge-report.ts) for the answers given before Fastify routes a request.
 *
 * `reader.request_log` chooses which requests get that line: `all`, `errors` (responses of 400 and
 * up: refusals, unknown files, overload) or `off`. A request that failed with an error is logged
 * whatever the setting. The line is a measurable part of a busy reader's time per request
 * (docs/BENCHMARKS.md); the metrics count every response anyway.
 */
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import type { RequestLogMode } from '../config.js';
import { REQUEST_LINE_MSG, scrubUrl } from '../log.js';

/**
 * Request ids as Fastify makes them by default (`req-1`, `req-2`, ... in base 36, wrapping at
 * 2^31), from one counter that Fastify (genReqId) and the front door share.
 */
export function createRequestIds(): () => string {
  let next = 0;
  return () => {
    next = (next + 1) & 0x7fffffff;
    return `req-${next.toString(36)}`;
  };
}

/** Responses below this status get no line (a request that failed with an error always gets one). */
export function minLoggedStatus(mode: RequestLogMode = 'all'): number {
  return mode === 'all' ? 0 : mode === 'errors' ? 400 : Number.POSITIVE_INFINITY;
}

/**
 * The fields of the request line, in the same order from every sender (Fastify, the front door, the
 * edge: edge-report.ts). What the edge cannot know (the method and URL of a request Node could not
 * parse, the time of a request it never saw begin) is left out of the line.
 */
export function requestLine(
  reqId: string,
  method: string | undefined,
  url: string | undefined,
  status: number,
  elapsedMs: number | undefined,
  keyId: string | undefined,
  ip: string | undefined,
) {
  return {
    reqId,
    method,
    url: url === undefined ? undefined : scrubUrl(url),
    status,
    ms: elapsedMs === undefined ? undefined : Math.round(elapsedMs * 100) / 100,
    keyId,
    ip,
  };
}

export class ReaderLogController extends LogController {
  private readonly minStatus: number;

  constructor(mode: RequestLogMode = 'all') {
    super();
    this.minStatus = minLoggedStatus(mode);
  }

  override incomingRequest(): void {}

  override routeNotFound(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (!error && reply.statusCode < this.minStatus) return;
    const line = requestLine(request.id, request.method, request.url, reply.statusCode, reply.elapsedTime, request.principal?.id, request.ip);
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    // REQUEST_LINE_MSG: an asynchronous logger (log.ts) buffers these lines, and only these.
    else reply.log.info(line, REQUEST_LINE_MSG);
  }
}
