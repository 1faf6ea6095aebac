/**
 * The systems the freshness bench compares, started side by side: oddsfiles in one process and
 * with a process per role, optionally a variant of the latter (another concurrency, carry limit,
 * validation threads or environment) and both shapes from a baseline build, and the bare reference pipeline (not with
 * --put: it takes no PUT). Each with a poller of its own; and a subscriber of the bench to every
 * system's announcements, which times them for the stages of a drop.
 */
import { Redis } from 'ioredis';
import { TEST_REDIS_URL } from '../../../test/helpers/redis.js';
import { startS3rver } from '../../../test/helpers/s3/s3rver.js';
import { BareSystem } from '../bare/system.js';
import { OddsfilesSystem } from '../common/oddsfiles-system.js';
import { Poller } from '../common/poller.js';
import type { System } from '../common/rounds.js';
import { onCleanup } from '../common/run.js';
import { nowMs } from '../common/stats.js';

/** A system measured, by the name the report gives it; `etag` is that of the measured feed's newest version there. */
export interface Target {
  readonly name: string;
  readonly sys: System;
  readonly poller: Poller;
  etag: string | undefined;
}

export interface TargetOptions {
  /** Where the oddsfiles systems publish: fs, or s3 (an s3rver started here, a prefix per system). */
  readonly store: string;
  /** ingest.concurrency and ingest.carry_max_bytes of the oddsfiles systems (none: the service's own). */
  readonly concurrency: number | undefined;
  readonly carryMaxBytes: number | undefined;
  /** More environment of the oddsfiles processes. */
  readonly env: Record<string, string>;
  /** The variant, started when it sets anything: its concurrency, carry limit and more environment. */
  readonly variant: {
    readonly concurrency: number | undefined;
    readonly carryMaxBytes: number | undefined;
    readonly validateThreads: number | undefined;
    readonly env: Record<string, string>;
  };
  /** The entry point of a baseline build, if any. */
  readonly baseline: string | undefined;
  readonly put: boolean;
}

/** The systems compared, in the report's order: one process, process per role, baseline, variant, bare. */
export async function startTargets(o: TargetOptions): Promise<Target[]> {
  const ingest = {
    ...(o.carryMaxBytes === undefined ? {} : { carry_max_bytes: o.carryMaxBytes }),
    ...(o.concurrency === undefined ? {} : { concurrency: o.concurrency }),
  };
  const config = Object.keys(ingest).length === 0 ? undefined : { ingest };
  const v = o.variant;
  const hasVariant = v.concurrency !== undefined || v.carryMaxBytes !== undefined || v.validateThreads !== undefined || Object.keys(v.env).length > 0;

  const targets: Target[] = [];
  const s3 = o.store === 's3' ? await startS3rver() : undefined;
  if (s3) onCleanup(() => s3.stop());
  /** Each system under its own prefix of the one bucket. */
  const storeEnv = (label: string) => (s3 ? { ...s3.env, STORE_URL: `s3://${s3.bucket}/${label}` } : undefined);
  const systemOptions = (label: string) => ({ ...(config ? { config } : {}), env: { ...(s3 ? storeEnv(label) : {}), ...o.env } });
  const single = await OddsfilesSystem.start({ label: 'fresh-single', shape: 'single', ...systemOptions('fresh-single') });
  const split = await OddsfilesSystem.start({ label: 'fresh-split', shape: 'split', ...systemOptions('fresh-split') });
  const variant = hasVariant
    ? await OddsfilesSystem.start({
        label: 'fresh-variant',
        shape: 'split',
        config: {
          ...config,
          ingest: {
            ...config?.ingest,
            ...(v.concurrency === undefined ? {} : { concurrency: v.concurrency }),
            ...(v.carryMaxBytes === undefined ? {} : { carry_max_bytes: v.carryMaxBytes }),
            ...(v.validateThreads === undefined ? {} : { validate_threads: v.validateThreads }),
          },
        },
        env: { ...(s3 ? storeEnv('fresh-variant') : {}), ...o.env, ...v.env },
      })
    : undefined;
  const variantName = `oddsfiles (process per role, ${[
    ...(v.concurrency === undefined ? [] : [`concurrency ${v.concurrency}`]),
    ...(v.carryMaxBytes === undefined ? [] : [`carry_max_bytes ${v.carryMaxBytes}`]),
    ...(v.validateThreads === undefined ? [] : [`validate_threads ${v.validateThreads}`]),
    ...Object.entries(v.env).map(([k, x]) => `${k}=${x}`),
  ].join(', ')})`;
  const baseline = o.baseline
    ? ([
        [
          'oddsfiles (one process), baseline',
          await OddsfilesSystem.start({ label: 'fresh-base-single', shape: 'single', bin: o.baseline, ...systemOptions('fresh-base-single') }),
        ],
        [
          'oddsfiles (process per role), baseline',
          await OddsfilesSystem.start({ label: 'fresh-base-split', shape: 'split', bin: o.baseline, ...systemOptions('fresh-base-split') }),
        ],
      ] as const)
    : [];
  const bare = o.put ? undefined : await BareSystem.start('fresh-bare');
  for (const [name, sys] of [
    ['oddsfiles (one process)', single],
    ['oddsfiles (process per role)', split],
    ...baseline,
    ...(variant ? ([[variantName, variant]] as const) : []),
    ...(bare ? ([['bare reference', bare]] as const) : []),
  ] as const) {
    targets.push({ name, sys, poller: new Poller(sys.readerUrl!, sys.key), etag: undefined });
  }

  return targets;
}

/** Announcements, timed by a subscriber of our own: sha256 → when it was seen. */
export async function subscribeAnnouncements(targets: readonly Target[]): Promise<{ announced: Map<string, number>; sub: Redis }> {
  const announced = new Map<string, number>();
  const sub = new Redis(TEST_REDIS_URL);
  await new Promise((r) => sub.once('ready', r));
  await sub.subscribe(...targets.map((t) => t.sys.channel));
  sub.on('message', (_c: string, message: string) => {
    const at = nowMs();
    const m = JSON.parse(message) as { entry?: { sha256: string }; sha?: string };
    const sha = m.entry?.sha256 ?? m.sha;
    if (sha) announced.set(sha, at);
  });

  return { announced, sub };
}
