/**
 * The history endpoints, after the checks every /v1 endpoint shares (v1-handler.ts admit):
 *
 * - GET /v1/history/{filename}: the file's retained versions, newest first, paged (`limit`,
 *   `before` = an ISO time or the `next` cursor of the previous page), or with `at` = an ISO time
 *   the one version that was current then.
 * - GET /v1/history/{filename}/{etag}: that version's exact bytes, immutable, gzip/br on demand.
 *
 * A key reads history only if its plan says how far back (`history`); a version is within that
 * window while it was current at some moment in it. The index is the catalog's history set
 * (src/catalog/history-index.ts); the bytes come from the store through versionBytes and are
 * checked against the sha256 the index names before they are served.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { HistoryIndex, HistoryVersion } from '../../catalog/history-index.js';
import { HttpProblem } from '../../errors.js';
import type { Principal } from '../../keys/ring.js';
import { sendFlat } from '../problem.js';
import { formatGeneratedAt, parseIsoTime } from '../../feeds/generated-at.js';
import type { Admitted, V1Handler, V1Reply } from '../data/v1-handler.js';
import { etagFor } from '../data/version.js';
import type { VersionBytes } from '../data/version-bytes.js';
import type { HistoryBytes } from './bytes.js';
import { HISTORY_LIST_PATH, HISTORY_LIST_SCHEMA, HISTORY_VERSION_PATH, HISTORY_VERSION_SCHEMA } from './openapi.js';
import { jsonAnswer } from '../data/json-answer.js';

const MAX_LIMIT = 1000;
const DEFAULT_LIMIT = 100;
const ETAG_RE = /^"?([0-9a-f]{32})"?$/;
/** ISO 8601 with a date and a time (and a zone), as the API writes them. */
const CURSOR_RE = /^\d{15}:\d{15}:[0-9a-f]{64}:\d{1,15}:-?\d{1,16}$/;

export interface HistoryRoutesDeps {
  readonly v1: V1Handler;
  readonly index: HistoryIndex;
  readonly bytes: HistoryBytes;
  readonly versionBytes: VersionBytes;
  readonly now?: () => number;
}

const json = jsonAnswer;

const bad = (detail: string) => new HttpProblem('bad_request', detail);
const NO_HISTORY = new HttpProblem(
  'history_forbidden',
  "This key's plan does not include history: GET /v1/history needs a plan that says how far back (`history`).",
);

function listed(v: HistoryVersion) {
  return {
    etag: etagFor(v.sha256, 'identity'),
    sha256: v.sha256,
    size: v.size,
    // Written as GET /v1/catalog and /v1/files write it (to the second when it has no milliseconds).
    generated_at: formatGeneratedAt(v.generatedAtMs),
    published_at: new Date(v.publishedMs).toISOString(),
  };
}

function isoTime(value: string): number {
  return parseIsoTime(value) ?? Number.NaN;
}

/**
 * The 400 for a time parameter that is not an ISO 8601 time. A zone's `+` sent raw arrives as a
 * space (a `+` in a query string means one): that is said, with the spelling that works.
 */
function badTime(param: string, value: string, alternative = ''): HttpProblem {
  const plus = value.replace(/ (\d{2}:\d{2})$/, '+$1');
  if (plus !== value && parseIsoTime(plus) !== undefined) {
    return bad(`${param} arrived as "${value}": in a URL query a + means a space, so a zone's + must be sent as %2B (${param}=${plus.replace('+', '%2B')}).`);
  }
  return bad(`${param} is an ISO 8601 time with a zone, e.g. 2026-01-01T12:00:00Z${alternative}.`);
}

export function registerHistoryRoutes(app: FastifyInstance, deps: HistoryRoutesDeps): void {
  const { v1, index } = deps;
  const now = deps.now ?? Date.now;

  const send = (request: FastifyRequest, reply: FastifyReply, r: V1Reply): FastifyReply => {
    request.principal = r.principal ?? null;
    return sendFlat(reply, r.status, r.headers, r.body);
  };

  /** The window's start for `principal`, or the problem when its plan reads no history. */
  const windowStart = (p: Principal): number | HttpProblem => {
    if (p.historyMs === undefined) return NO_HISTORY;
    return now() - p.historyMs;
  };
  const beyond = (p: Principal, what: string) =>
    new HttpProblem('history_forbidden', `${what} is older than this key's history reaches (${Math.round((p.historyMs ?? 0) / 1000)} s back).`);

  const list = async (a: Admitted, filename: string, q: Record<string, string | undefined>): Promise<HttpProblem | ReturnType<typeof json>> => {
    const from = windowStart(a.principal);
    if (typeof from !== 'number') return from;
    if (q.at !== undefined) {
      if (q.before !== undefined || q.limit !== undefined) return bad('at asks for one version: no before or limit with it.');
      const at = isoTime(q.at);
      if (!Number.isFinite(at)) return badTime('at', q.at);
      if (at < from) return beyond(a.principal, `at ${q.at}`);
      const v = await index.at(filename, Math.min(at, now()));
      if (!v) return new HttpProblem('not_found', `No version of ${filename} kept was published at or before ${q.at}.`);
      return json({ filename, version: listed(v) });
    }
    const limit = q.limit === undefined ? DEFAULT_LIMIT : Number(q.limit);
    if (!/^\d{1,4}$/.test(q.limit ?? '1') || !Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
      return bad(`limit is an integer from 1 to ${MAX_LIMIT}.`);
    }
    let page;
    if (q.before === undefined) page = await index.page(filename, { limit });
    else if (CURSOR_RE.test(q.before)) {
      if (Number(q.before.slice(0, 15)) < from) return beyond(a.principal, 'This cursor');
      page = await index.page(filename, { after: q.before, limit });
    } else {
      const before = isoTime(q.before);
      if (!Number.isFinite(before)) return badTime('before', q.before, ', or the `next` of a previous page');
      if (before < from) return beyond(a.principal, `before ${q.before}`);
      page = await index.page(filename, { beforeMs: before, limit });
    }
    // Within the window: versions published in it, and the one current when it starts.
    const versions: HistoryVersion[] = [];
    let more = page.more;
    for (const v of page.versions) {
      versions.push(v);
      if (v.publishedMs <= from) {
        more = false;
        break;
      }
    }
    const last = versions[versions.length - 1];
    return json({ filename, versions: versions.map(listed), next: more && last ? last.member : null });
  };

  const version = async (a: Admitted, filename: string, hex: string, request: FastifyRequest) => {
    const from = windowStart(a.principal);
    if (typeof from !== 'number') return from;
    const v = await index.byEtag(filename, hex);
    if (!v) return new HttpProblem('not_found', `No version of ${filename} with this ETag is kept.`);
    if (v.publishedMs < from) {
      // Still within reach while it was current at some moment of the window.
      const next = await index.next(filename, v);
      if (next && next.publishedMs <= from) return beyond(a.principal, 'This version');
    }
    const bytes = await deps.versionBytes.get(filename, v.sha256);
    if (!bytes) return new HttpProblem('not_found', `This version of ${filename} is no longer in the store.`);
    return deps.bytes.answer(filename, v, bytes, request.headers);
  };

  const handle = async (request: FastifyRequest, reply: FastifyReply, filename: string, etag: string | undefined) => {
    const a = await v1.admit(request.raw as IncomingMessage);
    if ('status' in a) return send(request, reply, a);
    request.principal = a.principal;
    return send(request, reply, v1.replyFor(a, await answer(a, filename, etag, request)));
  };

  const answer = async (a: Admitted, filename: string, etag: string | undefined, request: FastifyRequest) => {
    // The file first, refused exactly as GET /v1/data refuses it for this key (404, 403).
    const refused = v1.refusal(a.principal, filename);
    if (refused) return refused;
    if (etag === undefined) return list(a, filename, request.query as Record<string, string | undefined>);
    const m = ETAG_RE.exec(etag);
    return m ? version(a, filename, m[1]!, request) : bad('An ETag here is the 32 hex digits GET /v1/history lists (quoted or not).');
  };

  app.get<{ Params: { filename: string } }>(HISTORY_LIST_PATH, { schema: HISTORY_LIST_SCHEMA }, (request, reply) =>
    handle(request, reply, request.params.filename, undefined),
  );
  app.get<{ Params: { filename: string; etag: string } }>(HISTORY_VERSION_PATH, { schema: HISTORY_VERSION_SCHEMA }, (request, reply) =>
    handle(request, reply, request.params.filename, request.params.etag),
  );
}
