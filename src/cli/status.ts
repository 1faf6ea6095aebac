import type { Command } from 'commander';
import { createCatalog } from '../catalog/redis-catalog.js';
import type { CatalogEntry } from '../catalog/types.js';
import { formatAge } from '../duration.js';
import { buildRegistry } from '../feeds/registry.js';
import { createIngestQueue } from '../ingest/queue.js';
import { createRejectionLog } from '../ingest/rejection-log.js';
import type { CliContext } from './context.js';
import { formatTable } from './table.js';

const QUEUE_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'failed', 'completed'] as const;

export interface FeedStatus extends CatalogEntry {
  readonly ageMs: number;
  readonly stale: boolean;
  readonly staleAfterMs: number;
}

export function registerStatusCommand(program: Command, ctx: CliContext): void {
  program
    .command('status')
    .description('queue counts, every published feed with its age (stale ones marked), the last rejections; exit 1 when a feed is stale')
    .option('--json', 'machine-readable output')
    .option('--rejections <n>', 'how many recent rejections to show', '10')
    .action(async (opts: { json?: boolean; rejections: string }) => {
      const config = ctx.config();
      const redis = await ctx.redis();
      const queue = createIngestQueue(redis, config.redis.prefix);
      try {
        const now = Date.now();
        const [counts, snapshot, rejections] = await Promise.all([
          queue.getJobCounts(...QUEUE_STATES),
          createCatalog(redis, ctx.keys()).snapshot(),
          createRejectionLog(redis, ctx.keys()).latest(Math.max(0, Number(opts.rejections) || 0)),
        ]);
        const feeds: FeedStatus[] = snapshot.entries.map((e) => {
          const staleAfterMs = config.staleAfterMs[e.kind];
          const ageMs = now - e.generatedAtMs;
          return { ...e, ageMs, staleAfterMs, stale: ageMs > staleAfterMs };
        });
        const published = new Set(feeds.map((f) => f.filename));
        const missing = buildRegistry(config.bookmakers, config.sports).filenames.filter((n) => !published.has(n));
        const stale = feeds.filter((f) => f.stale).length;
        if (opts.json) {
          ctx.io.stdout.write(`${JSON.stringify({ now: new Date(now).toISOString(), seq: snapshot.seq, queue: counts, feeds, missing, stale, rejections }, null, 2)}\n`);
        } else {
          const out = ctx.io.stdout;
          out.write(`queue    ${QUEUE_STATES.map((s) => `${s} ${counts[s] ?? 0}`).join(', ')}\n\n`);
          if (feeds.length === 0) out.write('no feed published yet\n');
          else
            out.write(
              formatTable(
                ['FILENAME', 'BOOKMAKER', 'GENERATED_AT', 'AGE', 'SIZE', 'STATE'],
                feeds.map((f) => [f.filename, f.bookmaker, f.generatedAt, formatAge(f.ageMs), String(f.size), f.stale ? `STALE (> ${formatAge(f.staleAfterMs)})` : 'fresh']),
              ),
            );
          out.write(`\n${feeds.length} published, ${stale} stale, ${missing.length} of the registry's ${feeds.length + missing.length} never published\n`);
          if (rejections.length > 0) {
            out.write('\nlast rejections\n');
            out.write(formatTable(['ID', 'FILENAME', 'REASON', 'DETAIL'], rejections.map((r) => [r.id, r.filename, r.reason, r.detail.slice(0, 100)])));
          }
        }
        if (stale > 0) process.exitCode = 1;
      } finally {
        await queue.close();
      }
    });
}
