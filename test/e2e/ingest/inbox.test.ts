/**
 * Over the real commands (child processes): `oddsfiles start --roles worker` writes the inbox
 * marker and registers it in Redis while it runs (the same marker again after a restart);
 * `publish` and `rejected retry` run from another DATA_DIR are refused before they move anything,
 * and run with the service's environment they go through.
 */
import { existsSync } from 'node:fs';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inboxMarkerPath, readInboxMarker } from '../../../src/ingest/drop-folder/inbox-marker.js';
import { newClaimId } from '../../../src/ingest/drop-folder/inbox.js';
import { listRejections, rejectionId, writeRejection } from '../../../src/ingest/rejections/rejected.js';
import { redisKeys } from '../../../src/redis/key-names.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

describe('the inbox the workers watch (oddsfiles start, publish, rejected retry)', () => {
  const prefix = uniquePrefix('e2e-inbox');
  const keys = redisKeys(prefix);
  let redis: Redis;
  let serviceDir: string;
  let otherDir: string;
  let env: Record<string, string>;
  let otherEnv: Record<string, string>;
  let svc: RunningOddsfiles | undefined;

  beforeAll(async () => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    serviceDir = await makeDataDir('e2e-inbox');
    otherDir = await makeDataDir('e2e-inbox-other');
    env = baseEnv(serviceDir, prefix);
    otherEnv = baseEnv(otherDir, prefix);
    svc = await startOddsfiles(env, ['start', '--roles', 'worker']);
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    redis?.disconnect();
    await dropPrefix(prefix);
  });

  it('the worker role writes the marker and keeps its id registered', async () => {
    const id = await readInboxMarker(join(serviceDir, 'inbox'));
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(await redis.zcard(keys.inbox(id!))).toBe(1);
    const ttl = await redis.pttl(keys.inbox(id!));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
    expect(svc!.logs.some((l) => l.msg === 'registered the inbox this worker watches' && l.inboxId === id)).toBe(true);
  });

  it('publish from another DATA_DIR is refused and moves nothing; with the service environment it publishes', async () => {
    const file = join(otherDir, 'site_live_northwind_soccer.json');
    await writeFile(file, JSON.stringify({ bookmaker: 'northwind', sport: 'soccer', events: [] }));
    const refused = await runCli(otherEnv, ['publish', file]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toContain(`INBOX_DIR (${join(otherDir, 'inbox')}) is not the inbox the running workers watch`);
    expect(refused.stderr).toContain('INBOX_DIR/DATA_DIR, REDIS_URL, REDIS_PREFIX');
    expect(existsSync(join(otherDir, 'inbox'))).toBe(false);

    const ok = await runCli(env, ['publish', file]);
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    // Stamped on receipt (the document has none), and said as `--url` says it.
    expect(ok.stdout.endsWith('\n')).toBe(true);
    const [name, outcome, at, ...rest] = ok.stdout.trimEnd().split('\t');
    expect([name, outcome, rest]).toEqual([file, 'published', []]);
    expect(at).toMatch(/^generated_at \d{4}-\d\d-\d\dT\S+Z$/);
    // Again, the same bytes: unchanged, with the published version's generated_at, not a new stamp.
    const again = await runCli(env, ['publish', file]);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(`${file}\tunchanged\t${at}\n`);
  });

  it('rejected retry --all from another DATA_DIR is refused and leaves REJECTED_DIR whole', async () => {
    const rejectedDir = join(otherDir, 'rejected');
    const source = join(otherDir, 'kept');
    await writeFile(source, '{}');
    await writeRejection(
      rejectedDir,
      {
        id: rejectionId(new Date(), newClaimId()),
        filename: 'site_live_bluewater_soccer.json',
        reason: 'schema',
        detail: 'events: required',
        received_at: new Date().toISOString(),
      },
      source,
    );
    const before = await listRejections(rejectedDir);
    const res = await runCli(otherEnv, ['rejected', 'retry', '--all']);
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    expect(res.stderr).toContain('is not the inbox the running workers watch');
    expect(await listRejections(rejectedDir)).toEqual(before);
    expect(await readFile(join(rejectedDir, before[0]!.id, before[0]!.filename), 'utf8')).toBe('{}');
    expect(existsSync(join(otherDir, 'inbox'))).toBe(false);
  });

  it('withdraws the registration on stop, and registers the same marker again after a restart', async () => {
    const inbox = join(serviceDir, 'inbox');
    const id = (await readInboxMarker(inbox))!;
    const marker = await readFile(inboxMarkerPath(inbox), 'utf8');
    expect(await svc!.stop()).toBe(0);
    expect(await redis.exists(keys.inbox(id))).toBe(0);
    svc = await startOddsfiles(env, ['start', '--roles', 'worker']);
    expect(await readFile(inboxMarkerPath(inbox), 'utf8')).toBe(marker);
    await waitFor(async () => (await redis.zcard(keys.inbox(id))) === 1, 10_000, 'the marker registered again');
    // The marker is a dotfile: never queued as a drop, never left for a watcher to report.
    expect((await readdir(inbox)).sort()).toEqual(['.oddsfiles-inbox', '.processing']);
  });
});
