/**
 * A superseded drop says which published generated_at won: in the worker's log line, in its job's
 * result and in `status`. A feed stamped ahead of the clock (a publisher's clock running fast) is
 * marked in `status`, with why newer drops are superseded.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIngestQueue } from '../../../src/ingest/queue.js';
import { drop, tinyDoc } from '../../helpers/drops.js';
import { readCatalog } from '../../helpers/published.js';
import { TEST_REDIS_URL, dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

interface StatusJson {
  feeds: { filename: string; generatedAt: string; ahead: boolean; aheadMs: number }[];
  ahead: number;
  superseded: { filename: string; generated_at: string; published_generated_at: string; received_at: string }[];
}

describe('superseded drops and feeds stamped ahead', () => {
  const prefix = uniquePrefix('e2e-superseded');
  let svc: RunningOddsfiles;
  let inbox: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    const dataDir = await makeDataDir('e2e-superseded');
    inbox = join(dataDir, 'inbox');
    env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  const published = (name: string, generatedAt: string) =>
    waitFor(async () => (await readCatalog(prefix)).get(name)?.generatedAt === generatedAt, 10_000, `${name} ${generatedAt} published`);
  const supersededLine = (name: string, generatedAt: string) =>
    waitFor(
      async () => svc.logs.find((l) => l.filename === name && l.outcome === 'superseded' && l.generatedAt === generatedAt),
      10_000,
      'the superseded log line',
    );

  it('names the published generated_at that won in the log line, the job result and status', async () => {
    const name = 'site_live_northwind_soccer.json';
    const newer = '2026-11-21T19:00:05Z';
    const older = '2026-11-21T19:00:00Z';
    await drop(inbox, name, tinyDoc('northwind', 'soccer', newer));
    await published(name, newer);
    await drop(inbox, name, tinyDoc('northwind', 'soccer', older));
    const line = await supersededLine(name, older);
    expect(line.publishedGeneratedAt).toBe(newer);

    const connection = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    const queue = createIngestQueue(connection, prefix);
    try {
      const results = (await queue.getJobs(['completed'])).map((j) => j.returnvalue);
      expect(results).toContainEqual(expect.objectContaining({ outcome: 'superseded', filename: name, generatedAt: older, publishedGeneratedAt: newer }));
    } finally {
      await queue.close();
      connection.disconnect();
    }

    const status = JSON.parse((await runCli(env, ['status', '--json'])).stdout) as StatusJson;
    expect(status.superseded[0]).toMatchObject({ filename: name, generated_at: older, published_generated_at: newer });
    const text = (await runCli(env, ['status'])).stdout;
    expect(text).toContain('last superseded');
    expect(text).toMatch(new RegExp(`${name}\\s+${older}\\s+${newer}`));

    // `publish` says it too, and --json carries it.
    const file = join(await makeDataDir('e2e-superseded-cli'), name);
    await writeFile(file, tinyDoc('northwind', 'soccer', older));
    const cli = await runCli(env, ['publish', file]);
    expect(cli.stdout).toContain(`superseded\tgenerated_at ${older} is not newer than the published ${newer}`);
    const json = JSON.parse((await runCli(env, ['publish', '--json', file])).stdout) as { outcome: string; publishedGeneratedAt: string }[];
    expect(json[0]).toMatchObject({ outcome: 'superseded', publishedGeneratedAt: newer });
  });

  it('marks a feed stamped minutes ahead of the clock, and the drops it supersedes', async () => {
    const name = 'site_pregame_redstone_tennis.json';
    // A publisher whose clock runs 3 minutes fast (within limits.future_skew, so published).
    const ahead = new Date(Math.floor(Date.now() / 1000) * 1000 + 3 * 60_000).toISOString().replace('.000Z', 'Z');
    await drop(inbox, name, tinyDoc('redstone', 'tennis', ahead));
    await published(name, ahead);
    // The next drop, stamped with the right time, is superseded.
    const right = new Date(Math.floor(Date.now() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
    await drop(inbox, name, tinyDoc('redstone', 'tennis', right));
    expect((await supersededLine(name, right)).publishedGeneratedAt).toBe(ahead);

    const status = JSON.parse((await runCli(env, ['status', '--json'])).stdout) as StatusJson;
    const feed = status.feeds.find((f) => f.filename === name)!;
    expect(feed.ahead).toBe(true);
    expect(feed.aheadMs).toBeGreaterThan(2 * 60_000);
    expect(status.ahead).toBe(1);
    // The feed published with a time in the past is not marked.
    expect(status.feeds.find((f) => f.filename === 'site_live_northwind_soccer.json')!.ahead).toBe(false);
    expect(status.superseded[0]).toMatchObject({ filename: name, generated_at: right, published_generated_at: ahead });

    const text = (await runCli(env, ['status'])).stdout;
    expect(text).toMatch(new RegExp(`${name}.*AHEAD 2m\\d\\ds`));
    expect(text).toContain(`AHEAD: ${name}'s generated_at ${ahead} is 2m`);
    expect(text).toContain('drops stamped earlier are superseded until then');
  });
});
