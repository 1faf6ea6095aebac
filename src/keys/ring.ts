/**
 * The reader's in-memory copy of every key, so that authenticating costs one hash and one map
 * lookup, and keeps working while Redis is away. Reloaded at start, on every message on the keys
 * channel and periodically. Revocation is final: once a reader has seen a key revoked it stays
 * revoked even if a reload that started earlier still reads it as valid. A Redis that comes back
 * without any key leaves the held ones in place until they are restored.
 */
import type { Plan, Rate } from '../config.js';
import type { Logger } from '../log.js';
import { compilePatterns, effectiveAllow } from './patterns.js';
import { hashApiKeyHex, looksLikeApiKey } from './secret.js';
import type { KeySet } from './store.js';
import { parseKeyChange, type KeyRecord } from './types.js';

/** Who a request is acting for, and what it may read. */
export interface Principal {
  /** A key's id (key_…), or `mkt:<marketplace>:<subscriber>` for marketplace traffic. */
  readonly id: string;
  readonly name: string;
  readonly plan: string | null;
  /** The effective allow-list. Principals on the same allow-list may share this array (file lists are memoised on it). */
  readonly patterns: readonly string[];
  allows(filename: string): boolean;
  /** Who the request counts for: an API key, or a marketplace subscriber. */
  readonly kind: 'key' | 'subscriber';
  /** The plan's rate; undefined (no plan, or a plan without `rate`): not rate limited. */
  readonly rate: Rate | undefined;
  /** Open /v1/stream connections allowed at once (its plan's `streams`); undefined: the default. */
  readonly streams: number | undefined;
  /** How far back it may read older versions (its plan's `history`, ms); undefined: no history. */
  readonly historyMs?: number | undefined;
  /** The least conflate window of its streams (its plan's `conflate`, ms); undefined: none. */
  readonly conflateMs?: number | undefined;
  /** Publishers: PUT bodies received at once (its plan's `uploads`); undefined: the default. */
  readonly uploads?: number | undefined;
  /** The rate-limit counter this principal's requests go to (unique per key / per subscriber). */
  readonly rateKey: string;
  /**
   * What the key may publish, as a principal of its own: `patterns`/`allows` are its publish
   * patterns, `rate` its publish rate, `rateKey` a counter apart from its reads. Undefined: the
   * key may publish nothing (and marketplace subscribers never publish).
   */
  readonly publisher?: Principal | undefined;
}

export interface KeyRing {
  /** True once the keys have been loaded at least once. */
  readonly loaded: boolean;
  /** The principal of a valid, unrevoked key; undefined for anything else. */
  authenticate(key: unknown): Principal | undefined;
  /** Re-read every key (concurrent calls share one read; a call during a read causes another). */
  reload(): Promise<void>;
  /** Apply one message from the keys channel. */
  handleMessage(message: string): void;
  /** Call `listener` with the id of every key revoked from now on (open streams end at once). */
  onRevoked(listener: (id: string) => void): () => void;
  /** Whether this reader has seen the key with this id revoked (a request admitted before may still be under way). */
  isRevoked(id: string): boolean;
  readonly size: number;
  /** Keys held that may publish. */
  readonly publishers: number;
  /** Call `listener` after every load of the keys from now on. */
  onLoaded(listener: () => void): () => void;
}

export interface KeyRingDeps {
  readonly source: { loadAll(): Promise<KeySet> };
  readonly plans: Readonly<Record<string, Plan>>;
  readonly log: Logger;
  /** The publish rate of a key whose plan has no `publishRate` (config publish.rate); undefined: not limited. */
  readonly publishRate?: Rate | undefined;
}

export function createKeyRing(deps: KeyRingDeps): KeyRing {
  const { source, plans, log } = deps;
  let byHash = new Map<string, Principal>();
  let publishers = 0;
  const revoked = new Set<string>();
  let loaded = false;
  let running: Promise<void> | undefined;
  let again = false;
  const warnedPlans = new Set<string>();
  const revokedListeners = new Set<(id: string) => void>();
  const loadedListeners = new Set<() => void>();
  const markRevoked = (id: string) => {
    if (revoked.has(id)) return;
    revoked.add(id);
    for (const l of revokedListeners) l(id);
  };

  const principalOf = (record: KeyRecord): Principal => {
    if (record.plan !== null && !plans[record.plan] && !warnedPlans.has(record.plan)) {
      warnedPlans.add(record.plan);
      log.warn({ keyId: record.id, plan: record.plan }, 'key names a plan that is not configured; using its own patterns only');
    }
    const patterns = effectiveAllow(record, plans);
    const plan = record.plan === null ? undefined : plans[record.plan];
    const rate = plan?.rate;
    const publisher =
      record.publish.length === 0
        ? undefined
        : Object.freeze({
            id: record.id,
            name: record.name,
            plan: record.plan,
            patterns: record.publish,
            allows: compilePatterns(record.publish),
            kind: 'key' as const,
            rate: plan?.publishRate ?? deps.publishRate,
            streams: undefined,
            uploads: plan?.uploads,
            rateKey: `publish:key:${record.id}`,
          });
    return Object.freeze({
      id: record.id,
      name: record.name,
      plan: record.plan,
      patterns,
      allows: compilePatterns(patterns),
      kind: 'key' as const,
      rate,
      streams: record.plan === null ? undefined : plans[record.plan]?.streams,
      historyMs: plan?.historyMs,
      conflateMs: plan?.conflateMs,
      rateKey: `key:${record.id}`,
      publisher,
    });
  };

  const readOnce = async () => {
    const set = await source.loadAll();
    // Keys are revoked, never deleted: none at all while keys are held is a Redis that lost its
    // data, until the workers restore them from the store. Its consumers keep their access (and
    // their retries count as no failed authentications) until the restore's reload.
    if (set.hashes.size === 0 && byHash.size > 0) {
      log.warn({ held: byHash.size }, 'Redis holds no API keys: keeping the ones held until they are restored from the store');
      return;
    }
    const next = new Map<string, Principal>();
    for (const [hex, id] of set.hashes) {
      const record = set.records.get(id);
      if (!record) continue;
      if (record.revoked_at !== null) markRevoked(id);
      if (revoked.has(id)) continue;
      next.set(hex, principalOf(record));
    }
    byHash = next;
    publishers = 0;
    for (const p of next.values()) if (p.publisher !== undefined) publishers++;
    loaded = true;
    for (const l of loadedListeners) l();
  };

  const reload = (): Promise<void> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await readOnce();
        } while (again);
      } finally {
        running = undefined;
      }
    })();
    return running;
  };

  return {
    get loaded() {
      return loaded;
    },
    get size() {
      return byHash.size;
    },
    get publishers() {
      return publishers;
    },
    authenticate(key) {
      if (!looksLikeApiKey(key)) return undefined;
      // Looked up by the key's SHA-256: a hit is a match. Comparing digests in variable time
      // tells a guesser nothing it could use (it would need preimages), so there is no second,
      // constant-time compare (it could never fail, and it cost every request time).
      const principal = byHash.get(hashApiKeyHex(key));
      return principal === undefined || revoked.has(principal.id) ? undefined : principal;
    },
    reload,
    onLoaded(listener) {
      loadedListeners.add(listener);
      return () => loadedListeners.delete(listener);
    },
    onRevoked(listener) {
      revokedListeners.add(listener);
      return () => revokedListeners.delete(listener);
    },
    isRevoked: (id) => revoked.has(id),
    handleMessage(message) {
      const change = parseKeyChange(message);
      if (change?.op === 'revoke') markRevoked(change.id);
      reload().catch((err: unknown) => log.warn({ err }, 'reloading API keys failed; keeping the ones held'));
    },
  };
}
