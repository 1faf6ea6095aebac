/**
 * A successful /v1 answer (200 or 304) as plain data, built once by the route's own function and
 * sent by either lane: Fastify's reply (the routes) or Node's response (hot-path.ts). Both lanes
 * thus send the same status, the same headers in the same order, and the same bytes.
 */
import type { FastifyReply } from 'fastify';

export interface Answer {
  readonly status: 200 | 304;
  /** Response headers as [name, value, name, value, ...], names in lower case. */
  readonly headers: string[];
  /** Absent on 304. */
  readonly body?: Buffer;
}

/** Send `answer` through Fastify (which adds Content-Length for a body). */
export function sendAnswer(reply: FastifyReply, answer: Answer): FastifyReply {
  const h = answer.headers;
  for (let i = 0; i < h.length; i += 2) reply.header(h[i]!, h[i + 1]!);
  if (answer.body === undefined) return reply.code(answer.status).send();
  return reply.code(answer.status).send(answer.body);
}
