/**
 * What the publish step (publish.ts) takes and gives: its dependencies, the settled outcome of one
 * drop, and the publisher the worker calls.
 */
import type { Catalog } from '../../catalog/redis-catalog.js';
import type { CatalogEntry, DropOutcome } from '../../catalog/types.js';
import type { Config } from '../../config.js';
import type { RejectionReason } from '../../errors.js';
import type { FeedRegistry } from '../../feeds/registry.js';
import type { Logger } from '../../log.js';
import type { Store } from '../../store/store.js';
import type { Claim } from '../drop-folder/inbox.js';
import type { RejectionRecord } from '../rejections/rejected.js';
import type { SupersededRecord } from '../rejections/superseded-log.js';
import type { CarryPolicy } from './carry.js';
import type { DropChecker } from './checker.js';

export interface DropResult {
  readonly outcome: DropOutcome;
  readonly filename: string;
  readonly reason?: RejectionReason;
  readonly detail?: string;
  readonly rejectionId?: string;
  readonly sha256?: string;
  readonly generatedAt?: string;
  /** Superseded: the generated_at of the published version that won over this drop. */
  readonly publishedGeneratedAt?: string;
  /** The version published under the filename once settled: this drop's, or the one it is unchanged from or superseded by. */
  readonly current?: { readonly sha256: string; readonly generatedAt: string };
  /** Milliseconds spent reading, validating, writing the store and committing. */
  readonly timings: Readonly<Record<string, number>>;
  /** Its bytes were carried to readers in other processes (carried.ts): how many received them. */
  readonly carriedTo?: number;
}

export interface PublisherDeps {
  readonly config: Pick<Config, 'limits' | 'rejectedDir' | 'inboxDir' | 'ingest'>;
  readonly registry: FeedRegistry;
  /** Validates and hashes each drop (checker.ts). */
  readonly check: DropChecker;
  readonly store: Store;
  readonly catalog: Catalog;
  readonly log: Logger;
  /** Remember a rejection for `status` (best effort). */
  readonly recordRejection?: (record: RejectionRecord) => Promise<void>;
  /** Remember a superseded drop and the generated_at that won, for `status` (best effort). */
  readonly recordSuperseded?: (record: SupersededRecord) => Promise<void>;
  readonly now?: () => Date;
  /**
   * Called synchronously right after a commit whose outcome is `published` (before the manifest
   * covers it), with the exact bytes written to the store under `entry.object`. Must not keep the
   * publish waiting; whatever it throws is logged and ignored.
   */
  readonly onPublished?: (entry: CatalogEntry, seq: number, bytes: Buffer) => void;
  /**
   * Called synchronously before the commit of a version, with its SHA-256 and the bytes written
   * to the store: this process's reader may hear the commit's announcement before the commit call
   * returns (and so before onPublished). Whatever it throws is logged and ignored.
   */
  readonly onPublishing?: (sha256: string, bytes: Buffer) => void;
  /** Which versions are carried to readers in other processes ahead of their commit (carry.ts); none without it. */
  readonly carry?: CarryPolicy;
  /**
   * Restore the catalog from the store's manifest, forced: Redis lost commits (a commit found the
   * catalog's seq gone back, or the manifest writer found the catalog behind the manifest). Awaited
   * before the next manifest write; a rejection is retried.
   */
  readonly onCatalogBehind?: () => Promise<void>;
}

export interface Publisher {
  (claim: Claim, receivedAt: Date): Promise<DropResult>;
  /**
   * Write manifest.json now and remove the claims waiting for it (a published drop's claim goes
   * once a manifest covering it is in the store, written in the background).
   */
  flush(): Promise<void>;
  /** Stop the background manifest writer's timers. */
  close(): void;
}
