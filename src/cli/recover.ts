/**
 * `oddsfiles recover`: restore from the store what Redis lost (the catalog from manifest.json, the
 * history index from the history records, the API key records), as workers do by themselves when
 * they find the catalog empty or behind the manifest, and report what was restored. Safe to run
 * at any time: only what Redis lacks (or holds older) is put back, and nothing is published again.
 */
import type { Command } from 'commander';
import { createCatalog } from '../catalog/redis-catalog.js';
import { createLogger } from '../log.js';
import { openStore } from '../store/index.js';
import type { CliContext } from './context.js';

export function registerRecoverCommand(program: Command, ctx: CliContext): void {
  program
    .command('recover')
    .description('restore the catalog, the history index and the API keys from the store into Redis (what Redis lacks); report what was restored')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      const config = ctx.config();
      const redis = await ctx.redis();
      const keys = ctx.keys();
      const store = await openStore(config);
      try {
        const { recoverFromStore } = await import('../ingest/redis-recovery.js');
        const log = createLogger({ level: 'warn', pretty: false, destination: ctx.io.stderr });
        const catalog = createCatalog(redis, keys, config.changes, config.history);
        const r = await recoverFromStore({ redis, keys, store, catalog, log }, { force: true });
        const report = {
          files: r.files,
          manifest_files: r.manifestFiles,
          manifest_seq: r.manifestSeq,
          seq: r.seq,
          new_epoch: r.newEpoch,
          keys: r.keys,
          histories: r.histories,
        };
        if (opts.json) ctx.io.stdout.write(`${JSON.stringify(report)}\n`);
        else
          ctx.io.stdout.write(
            `restored ${r.files} of the manifest's ${r.manifestFiles} file(s), ${r.keys} API key(s), the history index of ${r.histories} file(s); ` +
              `position ${r.seq}${r.newEpoch ? ' (a new epoch of the change log: open streams get reset)' : ''}\n`,
          );
      } finally {
        await store.close();
      }
    });
}
