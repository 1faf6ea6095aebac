/**
 * Who may see /metrics and /admin/* (the ADMIN_TOKEN setting):
 * - ADMIN_TOKEN set: `Authorization: Bearer <token>` (or HTTP Basic with the token as the
 *   password, so a browser can open the dashboard through its own login prompt), from anywhere;
 *   none → 401, a wrong one → 401 (RFC 6750 invalid_token).
 * - ADMIN_TOKEN unset: loopback requests only (127.0.0.0/8, ::1): the connection must come from
 *   loopback and, behind a trusted proxy, so must the client it names; the Host must be a loopback
 *   name too (a DNS-rebinding page cannot reach the dashboard). Anything else → 403.
 * - Either way, a state-changing request (POST, PUT, ...) that a browser marks as cross-site is
 *   refused (403): another web page must not drive the dashboard with the operator's credentials.
 * Refusals are application/problem+json from the HttpProblem catalogue, with problems of their own
 * (admin_unauthorized, admin_forbidden, admin_cross_site: no API key is involved here). The token
 * is compared in constant time and never logged.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { HttpProblem } from '../errors.js';
import { PROBLEM_CONTENT_TYPE, problemPayload } from '../problem-json.js';

export const ADMIN_REALM = 'oddsfiles-admin';

export type AdminDenyReason = 'missing_token' | 'wrong_token' | 'not_loopback' | 'cross_site';

export type AdminDecision = { readonly ok: true } | { readonly ok: false; readonly reason: AdminDenyReason; readonly problem: HttpProblem };

/** What the check needs to know of a request (framework-free: the metrics server uses it too). */
export interface AdminRequestFacts {
  readonly method: string;
  readonly authorization: string | undefined;
  /** The socket's peer address. */
  readonly remoteAddress: string | undefined;
  /** The client address after trust_proxy (request.ip); the socket's peer when no proxy is trusted. */
  readonly clientIp: string | undefined;
  readonly host: string | undefined;
  readonly origin: string | undefined;
  readonly secFetchSite: string | undefined;
}

/** 127.0.0.0/8, ::1, and their IPv4-mapped IPv6 forms. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  let a = address.trim().toLowerCase();
  if (a.startsWith('[') && a.endsWith(']')) a = a.slice(1, -1);
  if (a.startsWith('::ffff:') && isIP(a.slice(7)) === 4) a = a.slice(7);
  if (isIP(a) === 4) return a.startsWith('127.');
  if (isIP(a) === 6) return a === '::1' || a === '0:0:0:0:0:0:0:1';
  return false;
}

/** A Host header naming this machine by loopback: localhost, 127.x.y.z, [::1] (any port). */
export function isLoopbackHost(host: string | undefined): boolean {
  if (!host) return false;
  const h = host.trim().toLowerCase();
  const name = h.startsWith('[') ? h.slice(0, h.indexOf(']') + 1) : h.replace(/:\d+$/, '');
  return name === 'localhost' || name.endsWith('.localhost') || isLoopbackAddress(name);
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** The token presented in an Authorization header: Bearer <token>, or Basic with the token as password. */
function presentedToken(authorization: string | undefined): string | undefined {
  if (!authorization) return undefined;
  const m = /^\s*(\S+)\s+(.+?)\s*$/.exec(authorization);
  if (!m) return undefined;
  const scheme = m[1]!.toLowerCase();
  if (scheme === 'bearer') return m[2];
  if (scheme === 'basic') {
    const decoded = Buffer.from(m[2]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    return colon >= 0 ? decoded.slice(colon + 1) : undefined;
  }
  return undefined;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

function isCrossSite(facts: AdminRequestFacts): boolean {
  if (SAFE_METHODS.has(facts.method.toUpperCase())) return false;
  const site = facts.secFetchSite?.toLowerCase();
  if (site && site !== 'same-origin' && site !== 'none') return true;
  if (facts.origin && facts.origin !== 'null') {
    try {
      return new URL(facts.origin).host.toLowerCase() !== (facts.host ?? '').toLowerCase();
    } catch {
      return true;
    }
  }
  return facts.origin === 'null';
}

/** Decide one request. `token` is config.adminToken. */
export function checkAdminAccess(token: string | undefined, facts: AdminRequestFacts): AdminDecision {
  if (isCrossSite(facts)) {
    return {
      ok: false,
      reason: 'cross_site',
      problem: new HttpProblem('admin_cross_site', 'Cross-site requests may not change anything on the admin endpoints.'),
    };
  }
  if (token !== undefined) {
    const given = presentedToken(facts.authorization);
    if (given === undefined) {
      return {
        ok: false,
        reason: 'missing_token',
        problem: new HttpProblem('admin_unauthorized', 'This admin endpoint needs the admin token: send Authorization: Bearer <ADMIN_TOKEN>.'),
      };
    }
    if (!timingSafeEqual(digest(given), digest(token))) {
      return { ok: false, reason: 'wrong_token', problem: new HttpProblem('admin_unauthorized', 'The admin token is not valid.') };
    }
    return { ok: true };
  }
  const loopback = isLoopbackAddress(facts.remoteAddress) && isLoopbackAddress(facts.clientIp ?? facts.remoteAddress) && isLoopbackHost(facts.host);
  if (!loopback) {
    return {
      ok: false,
      reason: 'not_loopback',
      problem: new HttpProblem(
        'admin_forbidden',
        'Without ADMIN_TOKEN the admin endpoints answer loopback requests (http://127.0.0.1 or http://localhost) only; set ADMIN_TOKEN to reach them from elsewhere.',
      ),
    };
  }
  return { ok: true };
}

/** The WWW-Authenticate challenges sent with a 401 (two headers: Bearer for tools, Basic for browsers). */
export function challenges(reason: AdminDenyReason): string[] {
  const bearer = reason === 'wrong_token' ? `Bearer realm="${ADMIN_REALM}", error="invalid_token"` : `Bearer realm="${ADMIN_REALM}"`;
  return [bearer, `Basic realm="${ADMIN_REALM}", charset="UTF-8"`];
}

/** The body of a refusal, as every problem+json of the service. */
export interface AdminGuardOptions {
  /** config.adminToken. */
  readonly token: string | undefined;
  /** Called on every refusal (metrics, e.g. authFailed('admin_token')). Never given the token. */
  readonly onDenied?: (reason: AdminDenyReason, request: FastifyRequest) => void;
}

/** The Fastify onRequest hook guarding /metrics and /admin/*: answers refusals itself (problem+json). */
export function adminGuard(options: AdminGuardOptions) {
  return async function guardAdmin(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const h = request.headers;
    const decision = checkAdminAccess(options.token, {
      method: request.method,
      authorization: h.authorization,
      remoteAddress: request.socket?.remoteAddress,
      clientIp: request.ip,
      host: h.host,
      origin: typeof h.origin === 'string' ? h.origin : undefined,
      secFetchSite: typeof h['sec-fetch-site'] === 'string' ? h['sec-fetch-site'] : undefined,
    });
    if (decision.ok) return undefined;
    options.onDenied?.(decision.reason, request);
    request.log.warn(
      { reqId: request.id, method: request.method, route: request.routeOptions.url, ip: request.ip, reason: decision.reason },
      'admin access refused',
    );
    const { problem } = decision;
    reply.code(problem.status).header('content-type', PROBLEM_CONTENT_TYPE).header('cache-control', 'no-store');
    if (problem.status === 401) reply.header('www-authenticate', challenges(decision.reason));
    // Answered here rather than thrown: the dashboard's own error handler must not reshape it.
    return reply.send(problemPayload(problem));
  };
}
