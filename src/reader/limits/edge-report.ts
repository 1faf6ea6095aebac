/**
 * The answers the reader gives before Fastify routes a request, which Fastify's hooks (the request
 * line of request-log.ts, the metrics' onResponse hook) never see: a URL that cannot be decoded
 * (Fastify's frameworkErrors: 400), a request Node's parser refuses (clientError: 400, 408, 414,
 * 431, written straight to the socket), and CONNECT and Upgrade requests (405, 404). Each gets the
 * same request line as any other answer (at the same `reader.request_log` threshold) and one count
 * in the HTTP metrics, under the route label of requests no route took (`unmatched`).
 *
 * What the edge cannot know is left out of the line: the method and URL of a request Node could
 * not parse (read from the start of the bytes it refused when they hold a request line; an over-long
 * URL is cut), and the time of a request whose beginning it never saw (then no duration is
 * observed either). The address is the socket's peer when the headers were not parsed.
 */
import type { Logger } from '../../log.js';
import { REQUEST_LINE_MSG, scrubUrl } from '../../log.js';
import { UNMATCHED_ROUTE } from '../../ports/route-labels.js';
import { requestLine } from '../request-log.js';

/** Counts one response (route label, method, status, ms when known), like ReaderAppDeps.onFrontDoorResponse. */
export type ResponseObserver = (route: string, method: string, status: number, durationMs: number | undefined) => void;

export interface EdgeResponse {
  /** The id Fastify gave the request, when it made one; else a new one is taken. */
  readonly reqId?: string | undefined;
  readonly method: string | undefined;
  readonly url: string | undefined;
  readonly status: number;
  readonly ms: number | undefined;
  readonly ip: string | undefined;
  /** The response failed (the socket broke before it was sent): logged as an error, whatever the setting. */
  readonly err?: Error | undefined;
}

export type EdgeReport = (response: EdgeResponse) => void;

export interface EdgeReportDeps {
  readonly log: Logger;
  /** minLoggedStatus(config.reader.requestLog). */
  readonly minLoggedStatus: number;
  /** The request ids Fastify and the front door share (createRequestIds). */
  readonly nextRequestId: () => string;
  readonly observe?: ResponseObserver | undefined;
}

export function createEdgeReport(deps: EdgeReportDeps): EdgeReport {
  const { log, minLoggedStatus, nextRequestId, observe } = deps;
  return (r) => {
    const line = requestLine(r.reqId ?? nextRequestId(), r.method, r.url, r.status, r.ms, undefined, r.ip);
    if (r.err) log.error({ ...line, err: r.err }, 'request errored');
    else if (r.status >= minLoggedStatus) log.info(line, REQUEST_LINE_MSG);
    observe?.(UNMATCHED_ROUTE, r.method ?? 'OTHER', r.status, r.ms);
  };
}

/** The longest URL a line carries for a request Node refused (an over-long one is the usual cause). */
const MAX_LOGGED_URL = 200;

/**
 * The method and URL at the start of `packet` (the bytes Node's parser refused), when it starts with
 * a request line; undefined otherwise (e.g. the refusal came in the middle of a request).
 */
export function requestLineOf(packet: Buffer | undefined): { method: string | undefined; url: string | undefined } {
  if (!packet) return { method: undefined, url: undefined };
  const head = packet.subarray(0, 8 * 1024 + 32).toString('latin1');
  const m = /^([A-Z][A-Z_-]{0,23}) ([^\s]+)(?: |\r|\n|$)/.exec(head);
  if (!m) return { method: undefined, url: undefined };
  // Scrubbed before it is cut, so that no part of a key survives the cut.
  const url = scrubUrl(m[2]!);
  return { method: m[1], url: url.length > MAX_LOGGED_URL ? `${url.slice(0, MAX_LOGGED_URL)}…` : url };
}
