/**
 * The hot path: the common case of /v1 answered on Node's `request` event, before Fastify.
 *
 * A paying consumer's poll is almost always the same request: an authenticated GET of
 * `/v1/files` or of a published file it may read, inside its plan's rate, answered 200 or 304
 * from memory. Through Fastify that costs a busy reader 50–60 µs of CPU; here 40–50, and 30–35
 * with `reader.request_log: errors` (docs/BENCHMARKS.md, Reader): no request and reply objects,
 * no hook chain, headers handed to Node as one flat list.
 *
 * It answers only when every check passes at once, and it takes nothing before it knows it will
 * answer: anything else (HEAD and other methods, a body, HTTP/2, no Host, a failed or marketplace-refused
 * credential, an address locked out, a rate that needs Redis or is used up, a name that is not
 * published or not allowed, a representation still being compressed, an overloaded or closing
 * process) goes to Fastify untouched, which answers it as it always has. What it sends is what
 * the routes send:
 * the same answer functions (dataAnswer, filesAnswer), the same rate-limit headers in the same
 * order, the same request line (request-log.ts), the same metrics, the same request ids and
 * client address (client-ip.ts). `test/reader.hot-path.test.ts` holds the two lanes to that.
 *
 * Hooks that other code adds to the Fastify app (ReaderAppDeps.register) do not see the requests
 * answered here; `reader.hot_path: false` sends every request through Fastify.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { KeyRing, Principal } from '../keys/ring.js';
import type { MarketplaceAuthenticator } from '../keys/marketplace.js';
import { REQUEST_LINE_MSG, type Logger } from '../log.js';
import type { FileLists } from './allow.js';
import type { Answer } from './answer.js';
import { API_KEY_HEADER } from './auth.js';
import type { PublishedCache } from './cache.js';
import { DATA_PREFIX, DATA_ROUTE, dataAnswer, MAX_NAME_LENGTH, type VariantPicker } from './data-route.js';
import { FILES_PATH, filesAnswer } from './files-route.js';
import type { RateDecision } from './rate-limit.js';
import { requestLine } from './request-log.js';

export interface HotPathDeps {
  readonly ring: KeyRing;
  readonly isLoaded: () => boolean;
  readonly marketplaces?: MarketplaceAuthenticator | undefined;
  /** True while some client address is locked out: then Fastify checks the address. */
  readonly anyLocked?: (() => boolean) | undefined;
  /** The plan limit when decidable at once and allowing (ReaderLimits.checkNow); undefined: ask Fastify. */
  readonly checkNow: (principal: Principal) => RateDecision | undefined;
  readonly published: PublishedCache;
  readonly lists: FileLists;
  readonly pick: VariantPicker;
  /** True while the app closes (Fastify adds `Connection: close`) or sheds load (@fastify/under-pressure: 503). */
  readonly unavailable: () => boolean;
  readonly nextRequestId: () => string;
  readonly clientIp: (req: IncomingMessage) => string | undefined;
  readonly log: Logger;
  /** Responses below this status get no request line (request-log.ts). */
  readonly minLoggedStatus: number;
  /** Counts one response (route pattern, method, status, ms), as the app's onResponse hook does. */
  readonly observe?: ((route: string, method: string, status: number, durationMs: number) => void) | undefined;
}

export interface HotPath {
  /** Answer `req` and return true, or return false having touched nothing. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** Requests answered here since start (tests, and the curious operator through a debugger). */
  readonly answered: number;
}

export function createHotPath(deps: HotPathDeps): HotPath {
  const { ring, isLoaded, checkNow, published, lists, pick, unavailable, nextRequestId, clientIp, log, minLoggedStatus, observe } = deps;
  const marketplaces = deps.marketplaces?.enabled ? deps.marketplaces : undefined;
  const anyLocked = deps.anyLocked ?? (() => false);
  let answered = 0;

  const principalOf = (req: IncomingMessage): Principal | undefined => {
    if (marketplaces) {
      const m = marketplaces.authenticate(req.headers);
      if (m.kind === 'ok') return m.principal;
      if (m.kind !== 'none') return undefined;
    }
    return ring.authenticate(req.headers[API_KEY_HEADER]);
  };

  return {
    handle(req, res) {
      const start = performance.now();
      const h = req.headers;
      if (req.method !== 'GET' || req.httpVersionMajor !== 1 || h.host === undefined) return false;
      // A GET with a body is Fastify's to read (and to refuse over its body limit).
      if ((h['content-length'] !== undefined && h['content-length'] !== '0') || h['transfer-encoding'] !== undefined) return false;
      const url = req.url!;
      let route: string;
      let name: string | undefined;
      if (url === FILES_PATH) route = FILES_PATH;
      else if (url.startsWith(DATA_PREFIX) && url.length > DATA_PREFIX.length && url.length - DATA_PREFIX.length <= MAX_NAME_LENGTH) {
        route = DATA_ROUTE;
        name = url.slice(DATA_PREFIX.length);
      } else return false;
      if (!isLoaded() || anyLocked() || unavailable()) return false;
      const principal = principalOf(req);
      if (principal === undefined) return false;

      // Everything that could refuse the request or make it wait is settled before its token is taken.
      let a: Answer;
      if (name === undefined) a = filesAnswer(lists.forPrincipal(principal), req.headers);
      else {
        // A name not held (unpublished, loading, encoded, with a query) or not allowed: Fastify.
        const version = published.get(name);
        if (version === undefined || !principal.allows(name)) return false;
        const variant = pick(version, req.headers['accept-encoding']);
        if (variant instanceof Promise) return false;
        a = dataAnswer(version, variant, req.headers);
      }
      const rate = checkNow(principal);
      if (rate === undefined) return false;

      const rateHeaders = rate.headers;
      let headers = a.headers;
      if (rateHeaders !== undefined) {
        headers = [];
        for (const k in rateHeaders) headers.push(k, rateHeaders[k]!);
        for (let i = 0; i < a.headers.length; i++) headers.push(a.headers[i]!);
      }
      if (a.body !== undefined) headers.push('content-length', String(a.body.length));
      res.writeHead(a.status, headers);
      res.end(a.body);
      answered++;

      const ms = performance.now() - start;
      if (a.status >= minLoggedStatus) log.info(requestLine(nextRequestId(), 'GET', url, a.status, ms, principal.id, clientIp(req)), REQUEST_LINE_MSG);
      observe?.(route, 'GET', a.status, ms);
      return true;
    },
    get answered() {
      return answered;
    },
  };
}
