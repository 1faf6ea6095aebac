/**
 * Every error the reader sends is `application/problem+json` (RFC 9457) built from the one
 * catalogue in src/errors.ts: our own HttpProblems, Fastify's errors (bad URL, body parsing...),
 * unknown routes and wrong methods (405 decided on onRequest, before any body is read), and errors
 * Node's HTTP parser meets before Fastify does. Those answered before routing are told to an
 * EdgeReport (edge-report.ts), so that they get their request line and count like the others.
 */
import type { Duplex } from 'node:stream';
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { HTTP_PROBLEMS, HttpProblem, type HttpProblemCode } from '../errors.js';
import { PROBLEM_CONTENT_TYPE, problemBody, problemHeaders, problemPayload } from '../problem-json.js';
import { requestLineOf, type EdgeReport } from './limits/edge-report.js';

/** Send `status`, `headers` (a flat list) and `body` through Fastify (which adds Content-Length when the list has none). */
export function sendFlat(reply: FastifyReply, status: number, headers: readonly string[], body: Buffer | undefined): FastifyReply {
  for (let i = 0; i < headers.length; i += 2) reply.header(headers[i]!, headers[i + 1]!);
  reply.code(status);
  return body === undefined ? reply.send() : reply.send(body);
}

export function sendProblem(reply: FastifyReply, problem: HttpProblem): FastifyReply {
  return sendFlat(reply, problem.status, problemHeaders(problem), problemPayload(problem));
}

/** The catalogue's code for a status: the first entry with it (the general one, e.g. `forbidden`, not `admin_forbidden`). */
const CODE_BY_STATUS = new Map<number, HttpProblemCode>();
for (const [code, p] of Object.entries(HTTP_PROBLEMS) as [HttpProblemCode, { status: number }][]) {
  if (!CODE_BY_STATUS.has(p.status)) CODE_BY_STATUS.set(p.status, code);
}

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

/**
 * Fastify's error handler: the problem for the error. Unexpected errors (500) are logged with the
 * error; our own problems (a 503 while loading or overloaded) are answers, not failures.
 */
export function errorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const problem = toProblem(err);
  if (problem.status >= 500 && !(err instanceof HttpProblem)) request.log.error({ err, reqId: request.id }, 'request failed');
  return sendProblem(reply, problem);
}

/**
 * Framework errors (Fastify's frameworkErrors: a URL that cannot be decoded, a path segment over
 * maxParamLength) are answered before routing, where Fastify runs no hook and writes no request
 * line: this handler answers them as errorHandler does and tells `report` (edge-report.ts) once the
 * answer is sent, so that they are logged and counted like every other answer.
 */
export function frameworkErrorHandler(report: EdgeReport, clientIp: (req: IncomingMessage) => string | undefined) {
  return function onFrameworkError(err: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
    const start = performance.now();
    const res = reply.raw;
    let reported = false;
    const done = (error?: Error) => {
      if (reported) return;
      reported = true;
      res.off('finish', onFinish);
      res.off('error', done);
      report({
        reqId: request.id,
        method: request.method,
        url: request.url,
        status: res.statusCode,
        ms: performance.now() - start,
        ip: clientIp(request.raw),
        err: error,
      });
    };
    const onFinish = () => done();
    res.once('finish', onFinish);
    res.once('error', done);
    return errorHandler(err, request, reply);
  };
}

/** Paths that exist, and the methods they take: other methods get 405 rather than 404. */
const KNOWN_PATH = /^\/(?:v1\/files|v1\/data\/.*|v1\/history\/.*|v1\/catalog|v1\/changes|v1\/stream|v1\/openapi\.json|healthz|readyz|metrics)\/?$/;
/** The change stream takes GET only (a HEAD would open a stream to send nothing of it). */
const GET_ONLY_PATH = /^\/v1\/stream\/?$/;

/** The methods every known path takes (the Allow header of a 405). */
export const ALLOWED_METHODS = 'GET, HEAD';

/**
 * onRequest hook (the last of the app's): a request that matched no route, with another method
 * than GET or HEAD on a path the API has, gets 405 + Allow at once, before any body is read or
 * parsed: a malformed or oversized body cannot turn it into a 400 or a 413.
 */
export function refuseOtherMethods(request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void {
  const method = request.method;
  if (method === 'GET' || !request.is404) return done();
  const path = request.url.split('?', 1)[0] ?? '';
  if (GET_ONLY_PATH.test(path)) return done(new HttpProblem('method_not_allowed', `Only GET is allowed here, not ${method}.`, { allow: 'GET' }));
  if (method === 'HEAD' || !KNOWN_PATH.test(path)) return done();
  done(new HttpProblem('method_not_allowed', `Only GET and HEAD are allowed here, not ${method}.`, { allow: ALLOWED_METHODS }));
}

/** refuseOtherMethods where /v1/data/{filename} also takes PUT (publish-route.ts): its 405 says so. */
export function refuseOtherMethodsWithPut(request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void {
  const method = request.method;
  if (method === 'GET' || method === 'HEAD' || !request.is404 || !request.url.startsWith('/v1/data/')) return refuseOtherMethods(request, reply, done);
  done(new HttpProblem('method_not_allowed', `Only GET, HEAD and PUT are allowed here, not ${method}.`, { allow: `${ALLOWED_METHODS}, PUT` }));
}

export function notFoundHandler(_request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return sendProblem(
    reply,
    new HttpProblem(
      'not_found',
      'No such resource. The API serves GET /v1/files, /v1/data/{filename}, /v1/catalog, /v1/changes, /v1/stream and /v1/history/{filename} (PUT /v1/data/{filename} to publish); GET /v1/openapi.json describes them.',
    ),
  );
}

/**
 * A problem written straight to a socket (before or outside Fastify), then the socket closed: at
 * once if it cannot be written to, else shortly after the answer (closing a socket with unread
 * input resets it, and the client could lose the answer).
 */
export function writeRawProblem(socket: Duplex, problem: HttpProblem, extraHeaders = ''): boolean {
  if (!socket.writable) {
    socket.destroy();
    return false;
  }
  const body = JSON.stringify(problemBody(problem));
  socket.end(
    `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status] ?? ''}\r\n` +
      `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extraHeaders}Cache-Control: no-store\r\nConnection: close\r\n\r\n${body}`,
  );
  const timer = setTimeout(() => socket.destroy(), 1000);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  return true;
}

/** Longest request line (method, target, version) before a header overflow counts as 414, not 431. */
const MAX_REQUEST_LINE = 8 * 1024;

/**
 * Did the request line cause the overflow? `chunk` is the data being parsed when it happened
 * (with TLS, a record of at most 16 KiB, so possibly the middle of a long request line): yes when
 * no line ends in it, its first line is very long, or its first line is the tail of a request
 * line (`… HTTP/1.1` without the method in front).
 */
function requestLineOverflows(chunk: Buffer): boolean {
  const eol = chunk.indexOf('\r\n');
  if (eol < 0 || eol > MAX_REQUEST_LINE) return true;
  const first = chunk.subarray(0, eol).toString('latin1');
  return / HTTP\/\d\.\d$/.test(first) && !/^[A-Z]+ \S+ HTTP\/\d\.\d$/.test(first);
}

/**
 * Node's HTTP parser rejects some requests before Fastify sees them (bad request line, header
 * overflow, timeouts): answer those with a problem too, written straight to the socket, and tell
 * `report` (edge-report.ts: the request line and the count). A header overflow caused by the
 * request line alone (an over-long URL) is a 414; otherwise 431.
 */
export function clientErrorHandler(report?: EdgeReport) {
  return function onClientError(err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Duplex): void {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    let code: HttpProblemCode =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? 'headers_too_large'
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? 'request_timeout'
          : err.code === 'HPE_URI_TOO_LONG'
            ? 'uri_too_long'
            : 'bad_request';
    if (code === 'headers_too_large' && err.rawPacket && requestLineOverflows(err.rawPacket)) code = 'uri_too_long';
    const problem = new HttpProblem(code, code === 'bad_request' ? 'The request could not be parsed as HTTP.' : HTTP_PROBLEMS[code].title);
    if (!writeRawProblem(socket, problem)) return;
    const { method, url } = requestLineOf(err.rawPacket);
    report?.({ method, url, status: problem.status, ms: undefined, ip: (socket as { remoteAddress?: string }).remoteAddress });
  };
}

/** onRequest hook: an HTTP/1.1 request must name its Host (RFC 9112 §3.2); 400 otherwise. */
export function requireHost(request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void {
  if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
    return done(new HttpProblem('bad_request', 'An HTTP/1.1 request must carry a Host header.'));
  }
  done();
}

/** What attachEdgeHandlers sets on the listener. */
export interface ServerLimits {
  readonly headersTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly maxRequestsPerSocket: number;
  readonly maxHeaderBytes: number;
}

/**
 * The parts of the listener Fastify does not set (or not for an HTTP/2 server's HTTP/1.1
 * fallback): header size and timeouts, how often they are checked, and answers to CONNECT and
 * to Upgrade requests (the API has no tunnel and no WebSocket): 405 and 404 problems, where Node
 * would otherwise drop the connection without a word, told to `report` (edge-report.ts).
 */
export function attachEdgeHandlers(server: object, limits: ServerLimits, report?: EdgeReport, clientIp?: (req: IncomingMessage) => string | undefined): void {
  const s = server as {
    maxHeaderSize?: number;
    headersTimeout?: number;
    requestTimeout?: number;
    keepAliveTimeout?: number;
    maxRequestsPerSocket?: number;
    connectionsCheckingInterval?: number;
    on(event: string, listener: (...args: never[]) => void): unknown;
  };
  s.maxHeaderSize = limits.maxHeaderBytes;
  // Node would answer an HTTP/1.1 request without Host with a bare 400; requireHost (a hook on
  // the app) answers it with a problem instead.
  (s as { requireHostHeader?: boolean }).requireHostHeader = false;
  s.requestTimeout = limits.requestTimeoutMs;
  s.headersTimeout = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  s.keepAliveTimeout = limits.keepAliveTimeoutMs;
  if (limits.maxRequestsPerSocket > 0) s.maxRequestsPerSocket = limits.maxRequestsPerSocket;
  // Node checks header and request timeouts on this period (30 s by default: too coarse).
  s.connectionsCheckingInterval = Math.min(2000, s.headersTimeout);
  const answered = (req: IncomingMessage, status: number) =>
    report?.({ method: req.method, url: req.url, status, ms: undefined, ip: clientIp ? clientIp(req) : req.socket.remoteAddress });
  s.on('connect', (req: IncomingMessage, socket: Duplex) => {
    socket.on('error', () => undefined);
    if (writeRawProblem(socket, new HttpProblem('method_not_allowed', 'Only GET and HEAD are allowed here, not CONNECT.'), `Allow: ${ALLOWED_METHODS}\r\n`))
      answered(req, 405);
  });
  s.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
    socket.on('error', () => undefined);
    if (writeRawProblem(socket, new HttpProblem('not_found', 'This API has no WebSocket or other upgradable endpoint.'))) answered(req, 404);
  });
}
