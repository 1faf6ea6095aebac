/**
 * The wire form of a problem (RFC 9457 `application/problem+json`): its body and headers, built in
 * one place for every sender (Fastify's error handler, the v1 handler, the edge).
 */
import type { HttpProblem } from './errors.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export interface ProblemBody {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly [extension: string]: unknown;
}

export function problemBody(problem: HttpProblem): ProblemBody {
  return { type: problem.type, title: problem.title, status: problem.status, detail: problem.detail, ...problem.extensions };
}

export function problemPayload(problem: HttpProblem): Buffer {
  return Buffer.from(JSON.stringify(problemBody(problem)));
}

/** The problem's own headers (Retry-After, WWW-Authenticate, ...), then its type and caching, as a flat list. */
export function problemHeaders(problem: HttpProblem): string[] {
  const out: string[] = [];
  const own = problem.headers;
  if (own) for (const k in own) out.push(k, own[k]!);
  out.push('content-type', PROBLEM_CONTENT_TYPE, 'cache-control', 'no-store');
  return out;
}
