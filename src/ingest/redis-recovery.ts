/**
 * Everything Redis holds that the store can give back: the catalog (from manifest.json), the
 * history index (from the history records, through HistoryRecords.repair) and the API key records
 * (keys/records.json). `recoverFromStore` restores them: at a worker's start, when a worker finds
 * the catalog without its epoch (a Redis that came back empty, a new Redis: checked every second),
 * when the manifest writer finds the catalog behind the manifest (Redis came back on older data),
 * and on demand (`oddsfiles recover`). The guard also keeps the store's copy of the key records
 * current (every few seconds, written only when they changed).
 */
import type { Redis } from 'ioredis';
import type { Catalog } from '../catalog/redis-catalog.js';
import { restoreCatalog, type RestoreReport } from '../catalog/restore.js';
import { createKeyBackup, type KeyBackup } from '../keys/backup.js';
import type { Logger } from '../log.js';
import type { RedisKeys } from '../redis/key-names.js';
import type { Store } from '../store/store.js';
import { createHistoryRecords } from './background/history-records.js';

export interface RecoveryDeps {
  readonly redis: Redis;
  readonly keys: RedisKeys;
  readonly store: Store;
  readonly catalog: Catalog;
  readonly log: Logger;
}

export interface RecoveryReport extends RestoreReport {
  /** Key records put back into Redis. */
  readonly keys: number;
  /** Published files whose history index was rebuilt from the store's records. */
  readonly histories: number;
}

/** Restore what Redis lacks from the store; with `force` even when the catalog has its epoch. */
export async function recoverFromStore(deps: RecoveryDeps, opts: { force?: boolean } = {}): Promise<RecoveryReport> {
  const { redis, keys, store, catalog, log } = deps;
  // Keys first: once the catalog has its epoch, the service runs as before, keys included.
  const keyCount = await createKeyBackup({ redis, keys, store }).restore();
  const report = await restoreCatalog(redis, keys, store, opts);
  const unbuilt = await catalog.history.unbuilt();
  await createHistoryRecords({ catalog, store, log }).repair();
  return { ...report, keys: keyCount, histories: unbuilt.length };
}

export interface RecoveryGuard {
  /** Restore now, forced (the catalog went back, or was found behind the manifest); rejects if it could not. */
  behind(): Promise<void>;
  close(): Promise<void>;
}

const CHECK_EVERY_MS = 1000;
const KEYS_SYNC_EVERY_MS = 5000;

/** Restore once (when needed) before resolving, then watch; the worker role runs it. */
export async function startRecoveryGuard(deps: RecoveryDeps): Promise<RecoveryGuard> {
  const { redis, keys, log } = deps;
  const backup: KeyBackup = createKeyBackup({ redis, keys, store: deps.store });
  let running: Promise<void> | undefined;
  let closed = false;
  let lastKeysSync = 0;

  const recover = async (force: boolean) => {
    const r = await recoverFromStore(deps, { force });
    if (r.ran && (r.files > 0 || r.keys > 0 || r.newEpoch)) {
      log.warn(
        { files: r.files, keys: r.keys, histories: r.histories, seq: r.seq, manifestSeq: r.manifestSeq, newEpoch: r.newEpoch },
        `Redis had lost data: restored ${r.files} file(s) and ${r.keys} key(s) from the store${r.newEpoch ? '; the change log starts a new epoch (open streams get reset)' : ''}`,
      );
    }
  };
  const check = async (force: boolean) => {
    if (force || (await redis.exists(keys.catalogEpoch)) === 0) await recover(force);
    if (Date.now() - lastKeysSync >= KEYS_SYNC_EVERY_MS) {
      await backup.sync();
      lastKeysSync = Date.now();
    }
  };
  const run = (force: boolean) => {
    if (closed) return Promise.resolve();
    running ??= check(force)
      .catch((err: unknown) => log.warn({ err: { message: (err as Error).message } }, 'could not check the catalog against the store; will retry'))
      .finally(() => (running = undefined));
    return running;
  };

  // At start a failure is retried by the timer: the worker may start (its commits wait for the epoch).
  await run(false);
  const timer = setInterval(() => void run(false), CHECK_EVERY_MS);
  timer.unref();
  return {
    behind: () => (closed ? Promise.resolve() : recover(true)),
    async close() {
      closed = true;
      clearInterval(timer);
      await running;
    },
  };
}
