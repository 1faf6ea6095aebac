/**
 * `oddsfiles keys create|list|revoke`. A key reads (its plan and --allow), publishes (--publish
 * patterns), or both. `create` prints the new key alone on stdout
 * (it is shown once, only its hash is stored); notes go to stderr. `list` never shows keys.
 */
import type { Command } from 'commander';
import { effectiveAllow } from '../keys/patterns.js';
import { createKeyStore, type KeyStore } from '../keys/store.js';
import type { KeyRecord } from '../keys/types.js';
import type { Config } from '../config.js';
import { UsageError } from '../errors.js';
import type { CliContext } from './context.js';
import { formatTable } from './table.js';
import { PRESENCE_WINDOW_MS, seenLately } from '../ops/presence.js';
import { redactUrl } from '../redis/connect.js';

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

export function registerKeysCommands(program: Command, ctx: CliContext): void {
  const keys = program.command('keys').description('API keys: create, list, revoke');
  const keyStore = async (): Promise<KeyStore> => createKeyStore({ redis: await ctx.redis(), keys: ctx.keys(), plans: ctx.config().plans });

  keys
    .command('create')
    .description('create a key and print it, alone, on stdout (it is not shown again)')
    .requiredOption('--name <name>', 'required: who the key is for (unique among keys not revoked)')
    .option('--plan <plan>', 'a plan from the configuration (its allow-list and rate apply)')
    .option('--allow <pattern>', 'a filename pattern the key may read, * matching any run of characters (repeatable)', collect, [])
    .option('--publish <patterns...>', 'filename patterns the key may publish with PUT /v1/data/{filename} (same syntax as --allow)')
    .action(async (opts: { name: string; plan?: string; allow: string[]; publish?: string[] }) => {
      const plans = ctx.config().plans;
      if (opts.plan !== undefined && !plans[opts.plan]) {
        throw new UsageError(`unknown plan "${opts.plan}"; plans: ${Object.keys(plans).sort().join(', ') || '(none)'}`);
      }
      const { key, record } = await (await keyStore()).create({ name: opts.name, plan: opts.plan, allow: opts.allow, publish: opts.publish });
      ctx.io.stdout.write(`${key}\n`);
      const allow = effectiveAllow(record, plans);
      const publish = record.publish.length > 0 ? `; publish: ${record.publish.join(', ')} (${describePublishRate(record, ctx.config())})` : '';
      ctx.io.stderr.write(
        `created ${record.id} (${record.name}); allow: ${allow.join(', ') || '(nothing)'}; rate: ${describeRate(record, plans)}${publish}. Store the key now: it is not shown again.\n`,
      );
      if (allow.length === 0 && record.publish.length === 0)
        ctx.io.stderr.write('warning: this key may read no file; give --plan or --allow (or --publish for a publisher key)\n');
      await warnWhenNothingServes(ctx);
    });

  keys
    .command('list')
    .description("every key's id, name, plan, allow-list, publish patterns, created and revoked times (never the key)")
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }) => {
      const plans = ctx.config().plans;
      const records = await (await keyStore()).list();
      if (opts.json) {
        const out = records.map((r) => ({
          ...r,
          plan_configured: r.plan === null || plans[r.plan] !== undefined,
          effective_allow: effectiveAllow(r, plans),
          rate: rateOf(r, plans),
          publish_rate: r.publish.length > 0 ? publishRateOf(r, ctx.config()) : null,
        }));
        ctx.io.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
        return;
      }
      if (records.length === 0) {
        ctx.io.stdout.write('no keys; create one with: oddsfiles keys create --name NAME --plan PLAN\n');
        return;
      }
      ctx.io.stdout.write(
        formatTable(
          ['ID', 'NAME', 'PLAN', 'ALLOW', 'PUBLISH', 'CREATED', 'REVOKED'],
          records.map((r) => row(r, plans)),
        ),
      );
      // A plan taken out of the configuration leaves its keys with their own patterns only (often
      // none: nothing to read). Readers warn once at start; say it here too, where keys are looked at.
      const orphans = records.filter((r) => r.revoked_at === null && r.plan !== null && plans[r.plan] === undefined);
      if (orphans.length > 0) {
        const names = [...new Set(orphans.map((r) => r.plan!))].join(', ');
        ctx.io.stderr.write(
          `${orphans.length} active key(s) name a plan that is not configured (${names}): they get their own --allow patterns only, and no rate\n`,
        );
      }
    });

  keys
    .command('revoke')
    .description('revoke a key by id or name; every reader refuses it within a second')
    .argument('<id-or-name>', 'the key id (key_...) or the name of a key that is not revoked')
    .action(async (idOrName: string) => {
      const { record, alreadyRevoked } = await (await keyStore()).revoke(idOrName);
      ctx.io.stdout.write(
        alreadyRevoked
          ? `${record.id} (${record.name}) was already revoked at ${record.revoked_at}\n`
          : `revoked ${record.id} (${record.name}) at ${record.revoked_at}\n`,
      );
    });
}

/** The key's rate (its plan's), as in the config; null: not rate limited. */
function rateOf(r: KeyRecord, plans: Parameters<typeof effectiveAllow>[1]): { max: number; per_seconds: number } | null {
  const rate = r.plan === null ? undefined : plans[r.plan]?.rate;
  return rate ? { max: rate.max, per_seconds: rate.perMs / 1000 } : null;
}

/** A publisher key's PUT rate: its plan's publish_rate, else publish.rate of the config. */
function publishRateOf(r: KeyRecord, config: Pick<Config, 'plans' | 'publish'>): { max: number; per_seconds: number } {
  const rate = (r.plan === null ? undefined : config.plans[r.plan]?.publishRate) ?? config.publish.rate;
  return { max: rate.max, per_seconds: rate.perMs / 1000 };
}

function describePublishRate(r: KeyRecord, config: Pick<Config, 'plans' | 'publish'>): string {
  const rate = publishRateOf(r, config);
  return `${rate.max} PUTs per ${rate.per_seconds} s`;
}

function describeRate(r: KeyRecord, plans: Parameters<typeof effectiveAllow>[1]): string {
  const rate = rateOf(r, plans);
  return rate ? `${rate.max} requests per ${rate.per_seconds} s` : 'not limited (no plan rate)';
}

function row(r: KeyRecord, plans: Parameters<typeof effectiveAllow>[1]): string[] {
  const plan = r.plan === null ? '-' : plans[r.plan] ? r.plan : `${r.plan} (not configured)`;
  return [r.id, r.name, plan, effectiveAllow(r, plans).join(',') || '-', r.publish.join(',') || '-', r.created_at, r.revoked_at ?? '-'];
}

/**
 * A key is looked up under the Redis and REDIS_PREFIX it was made under: made where no process of
 * the service has run lately (a mistyped prefix, another Redis), it would get 401 everywhere. Said
 * on stderr, after the key (which is made all the same: the service may simply not be started yet).
 */
async function warnWhenNothingServes(ctx: CliContext): Promise<void> {
  const running = await seenLately(await ctx.redis(), ctx.keys()).catch(() => undefined);
  if (running === undefined || running.length > 0) return;
  const { prefix } = ctx.config().redis;
  ctx.io.stderr.write(
    `warning: no oddsfiles process has run under REDIS_PREFIX "${prefix}" on ${redactUrl(await ctx.redisUrl())} in the last ${PRESENCE_WINDOW_MS / 1000} s; ` +
      'readers use the key only under the same Redis and prefix (check REDIS_URL and REDIS_PREFIX, or start the service)\n',
  );
}
