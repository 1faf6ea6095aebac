/**
 * Marketplace traffic: a marketplace such as RapidAPI proxies its subscribers'
 * requests and adds its proxy secret, the subscriber and the subscription plan as headers. A
 * request whose secret header matches (compared in constant time) is authenticated as that
 * subscriber on the mapped plan; its X-API-Key is the marketplace's business and is not looked
 * up. Outcomes:
 *
 * - no secret header of any marketplace: `none` (the request goes on to X-API-Key);
 * - a secret header present but no configured secret matches: `bad_secret` (401);
 * - the secret matches but the user header is missing or empty: `no_user` (401: the request
 *   cannot be attributed to anyone, so it is not authenticated);
 * - the subscription plan is missing or not in the marketplace's plan map: `unmapped_plan` (403);
 * - otherwise `ok` with the subscriber's principal: id `mkt:<marketplace>:<user>`, the mapped
 *   plan's allow-list and rate, counted per subscriber (`subscriber:<marketplace>:<user>`).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Marketplace, Plan } from '../config.js';
import { compilePatterns } from './patterns.js';
import type { Principal } from './ring.js';
import { sha256Hex } from '../sha256.js';

export type MarketplaceAuth =
  | { readonly kind: 'none' }
  | { readonly kind: 'bad_secret'; readonly marketplace: string }
  | { readonly kind: 'no_user'; readonly marketplace: string; readonly userHeader: string }
  | { readonly kind: 'unmapped_plan'; readonly marketplace: string; readonly plan: string | undefined }
  | { readonly kind: 'ok'; readonly principal: Principal };

export interface MarketplaceAuthenticator {
  /** True when at least one marketplace is configured. */
  readonly enabled: boolean;
  authenticate(headers: Readonly<Record<string, string | string[] | undefined>>): MarketplaceAuth;
}

const NONE: MarketplaceAuth = Object.freeze({ kind: 'none' });
/** Principals kept for reuse (file lists are memoised per allow-list, ids per subscriber). */
const MAX_CACHED_PRINCIPALS = 50_000;
/** Subscriber names used as they are in ids and counter names; anything else is hashed. */
const SAFE_USER = /^[A-Za-z0-9._@+-]{1,128}$/;

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

interface Entry {
  readonly m: Marketplace;
  readonly secretDigest: Buffer;
  /** Our plan for each of theirs, with the compiled allow-list shared by all its subscribers. */
  readonly plans: ReadonlyMap<string, { readonly plan: Plan; readonly patterns: readonly string[]; readonly allows: (f: string) => boolean }>;
}

export function createMarketplaceAuth(marketplaces: readonly Marketplace[], plans: Readonly<Record<string, Plan>>): MarketplaceAuthenticator {
  const entries: Entry[] = marketplaces.map((m) => {
    const mapped = new Map<string, { plan: Plan; patterns: readonly string[]; allows: (f: string) => boolean }>();
    const byOurs = new Map<string, { plan: Plan; patterns: readonly string[]; allows: (f: string) => boolean }>();
    for (const [theirs, ours] of Object.entries(m.plans)) {
      const plan = plans[ours];
      if (!plan) continue; // config.ts refuses such a map; be safe anyway
      let shared = byOurs.get(ours);
      if (!shared) {
        const patterns = Object.freeze([...new Set(plan.allow)]);
        shared = { plan, patterns, allows: compilePatterns(patterns) };
        byOurs.set(ours, shared);
      }
      mapped.set(theirs, shared);
    }
    // A configuration loaded with optionalSecrets (config.ts) may lack one: never serve without it.
    if (m.secret === undefined) throw m.missingSecret ?? new Error(`marketplace ${m.name}: no proxy secret`);
    return { m, secretDigest: digest(m.secret), plans: mapped };
  });
  const cache = new Map<string, Principal>();

  const principalFor = (e: Entry, user: string, theirPlan: string): Principal | undefined => {
    const cacheKey = `${e.m.name}\u0000${theirPlan}\u0000${user}`;
    const hit = cache.get(cacheKey);
    if (hit) return hit;
    const mapped = e.plans.get(theirPlan);
    if (!mapped) return undefined;
    const who = SAFE_USER.test(user) ? user : `h${sha256Hex(user).slice(0, 32)}`;
    const principal: Principal = Object.freeze({
      id: `mkt:${e.m.name}:${who}`,
      name: `${e.m.name} subscriber ${who}`,
      plan: mapped.plan.name,
      patterns: mapped.patterns,
      allows: mapped.allows,
      kind: 'subscriber' as const,
      rate: mapped.plan.rate,
      streams: mapped.plan.streams,
      historyMs: mapped.plan.historyMs,
      conflateMs: mapped.plan.conflateMs,
      rateKey: `subscriber:${e.m.name}:${who}`,
    });
    if (cache.size >= MAX_CACHED_PRINCIPALS) cache.clear();
    cache.set(cacheKey, principal);
    return principal;
  };

  return {
    enabled: entries.length > 0,
    authenticate(headers) {
      if (entries.length === 0) return NONE;
      let wrong: string | undefined;
      for (const e of entries) {
        const presented = headers[e.m.secretHeader];
        if (presented === undefined) continue;
        // SHA-256 of both sides, compared in constant time: neither length nor content leaks.
        const given = typeof presented === 'string' ? presented : presented.join(',');
        if (!timingSafeEqual(digest(given), e.secretDigest)) {
          wrong ??= e.m.name;
          continue;
        }
        const user = single(headers[e.m.userHeader]);
        if (user === undefined) return { kind: 'no_user', marketplace: e.m.name, userHeader: e.m.userHeader };
        const theirPlan = single(headers[e.m.planHeader]);
        const principal = theirPlan === undefined ? undefined : principalFor(e, user, theirPlan);
        if (!principal) return { kind: 'unmapped_plan', marketplace: e.m.name, plan: theirPlan };
        return { kind: 'ok', principal };
      }
      return wrong === undefined ? NONE : { kind: 'bad_secret', marketplace: wrong };
    },
  };
}

/** A header's value, trimmed (the first when repeated); undefined when absent or empty. */
function single(value: string | string[] | undefined): string | undefined {
  if (value === undefined) return undefined;
  const v = (Array.isArray(value) ? value[0] : value)?.trim();
  return v ? v : undefined;
}
