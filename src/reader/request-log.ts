/**
 * Fastify's request logging, reduced to one line per request written when the response is done:
 * method, URL (anything key-shaped scrubbed), status, time, key id. Never the key: the headers
 * are not logged, and the logger redacts X-API-Key (REDACT_PATHS) should anything log them.
 */
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import { scrubKeys } from '../keys/secret.js';
import { REQUEST_LINE_MSG } from '../log.js';

export class ReaderLogController extends LogController {
  override incomingRequest(): void {}

  override routeNotFound(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
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
