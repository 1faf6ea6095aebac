/**
 * Every error the reader sends is `application/problem+json` (RFC 9457) built from the one
 * catalogue in src/errors.ts: our own HttpProblems, Fastify's errors (bad URL, body parsing...),
 * unknown routes and wrong methods, and errors Node's HTTP parser meets before Fastify does.
 */
import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { HTTP_PROBLEMS, HttpProblem, type HttpProblemCode } from '../errors.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export interface ProblemBody {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
}

export function problemBody(problem: HttpProblem): ProblemBody {
  return { type: problem.type, title: problem.title, status: problem.status, detail: problem.detail };
}

export function sendProblem(reply: FastifyReply, problem: HttpProblem): FastifyReply {
  return reply
    .code(problem.status)
    .headers({ ...problem.headers, 'content-type': PROBLEM_CONTENT_TYPE, 'cache-control': 'no-store' })
    .send(Buffer.from(JSON.stringify(problemBody(problem))));
}

const CODE_BY_STATUS = new Map<number, HttpProblemCode>(
  (Object.entries(HTTP_PROBLEMS) as [HttpProblemCode, { status: number }][]).map(([code, p]) => [p.status, code]),
);

/** The catalogue's problem for any error: ours as they are, others by their status code. */
export function toProblem(err: unknown): HttpProblem {
  if (err instanceof HttpProblem) return err;
  const status = (err as FastifyError | undefined)?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const code = CODE_BY_STATUS.get(status) ?? 'bad_request';
    return new HttpProblem(code, clientDetail(err as FastifyError, code));
  }
  return new HttpProblem('internal', 'The request could not be served; it has been logged.');
}

function clientDetail(err: FastifyError, code: HttpProblemCode): string {
  switch (err.code) {
    case 'FST_ERR_BAD_URL':
      return 'The request URL is not valid (bad percent-encoding?).';
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return 'A path segment of the request URL is too long.';
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return 'This API takes no request body.';
    default:
      return code === 'bad_request' ? 'The request is malformed.' : HTTP_PROBLEMS[code].title;
  }
}

/** Fastify's error handler: the problem for the error; 5xx are logged with the error. */
export function errorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const problem = toProblem(err);
  if (problem.status >= 500) request.log.error({ err, reqId: request.id }, 'request failed');
  return sendProblem(reply, problem);
}

/** Paths that exist, and the methods they take: other methods get 405 rather than 404. */
const KNOWN_PATH = /^\/(?:v1\/files|v1\/data\/.*|healthz|readyz|metrics)\/?$/;

export function notFoundHandler(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const path = request.url.split('?', 1)[0] ?? '';
  if (request.method !== 'GET' && request.method !== 'HEAD' && KNOWN_PATH.test(path)) {
    return sendProblem(reply, new HttpProblem('method_not_allowed', `Only GET and HEAD are allowed here, not ${request.method}.`, { allow: 'GET, HEAD' }));
  }
  return sendProblem(reply, new HttpProblem('not_found', 'No such resource. The API serves GET /v1/files and GET /v1/data/{filename}.'));
}

/**
 * Node's HTTP parser rejects some requests before Fastify sees them (bad request line, header
 * overflow, timeouts): answer those with a problem too, written straight to the socket.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const code: HttpProblemCode =
    err.code === 'HPE_HEADER_OVERFLOW' ? 'headers_too_large' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'request_timeout' : err.code === 'HPE_URI_TOO_LONG' ? 'uri_too_long' : 'bad_request';
  const problem = new HttpProblem(code, code === 'bad_request' ? 'The request could not be parsed as HTTP.' : HTTP_PROBLEMS[code].title);
  const body = JSON.stringify(problemBody(problem));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status] ?? ''}\r\n` +
        `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}
