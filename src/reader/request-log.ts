/**
 * Fastify's request logging, reduced to one line per request written when the response is done:
 * method, URL (anything key-shaped scrubbed), status, time, key id. Never the key: the headers
 * are not logged, and the logger redacts X-API-Key (REDACT_PATHS) should anything log them.
 *
 * `reader.request_log` chooses which requests get that line: `all`, `errors` (responses of 400 and
 * up: refusals, unknown files, overload) or `off`. A request that failed with an error is logged
 * whatever the setting. The line costs a busy reader 6–17 µs of its 37–60 µs per request
 * (docs/BENCHMARKS.md); the metrics count every response anyway.
 */
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import type { RequestLogMode } from '../config.js';
import { scrubKeys } from '../keys/secret.js';
import { REQUEST_LINE_MSG } from '../log.js';

export class ReaderLogController extends LogController {
  /** Responses below this status get no line. */
  private readonly minStatus: number;

  constructor(mode: RequestLogMode = 'all') {
    super();
    this.minStatus = mode === 'all' ? 0 : mode === 'errors' ? 400 : Number.POSITIVE_INFINITY;
  }

  override incomingRequest(): void {}

  override routeNotFound(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (!error && reply.statusCode < this.minStatus) return;
    const line = {
      reqId: request.id,
      method: request.method,
      url: scrubKeys(request.url),
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 100) / 100,
      keyId: request.principal?.id,
      ip: request.ip,
    };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    // REQUEST_LINE_MSG: an asynchronous logger (log.ts) buffers these lines, and only these.
    else reply.log.info(line, REQUEST_LINE_MSG);
  }
}
