/**
 * The command line over the real commands (child processes) against a running service:
 * `rejected retry` reports each outcome as `publish` does and `status` stops listing a retried
 * rejection; `rejected purge` (and the workers' ingest.rejected_retention) remove old rejected
 * drops and their log entries; commands run with another (relative) DATA_DIR name their folders
 * and refuse, naming the folder the workers watch; `publish` with no worker running times out with
 * what to check; an unreachable Redis is named, without its password, in one line.
 */
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newClaimId } from '../../../src/ingest/drop-folder/inbox.js';
import { rejectionId, writeRejection, type RejectionRecord } from '../../../src/ingest/rejections/rejected.js';
import { createRejectionLog } from '../../../src/ingest/rejections/rejection-log.js';
import { redisKeys } from '../../../src/redis/key-names.js';
import { drop, rejectionRecords, tinyDoc } from '../../helpers/drops.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';
import { freePort } from '../../helpers/faults.js';

const DAY = 86_400_000;
const FEED = 'site_live_bluewater_soccer.json';

describe('oddsfiles commands against a running service', () => {
  const prefix = uniquePrefix('e2e-cli');
  const keys = redisKeys(prefix);
  let redis: Redis;
  let dataDir: string;
  let otherDir: string;
  let env: Record<string, string>;
  let svc: RunningOddsfiles | undefined;
  const seeded: RejectionRecord[] = [];

  /** A rejected drop received `ageMs` ago, kept in REJECTED_DIR and in the rejection log, as a worker leaves it. */
  const seedRejection = async (ageMs: number, filename = FEED): Promise<RejectionRecord> => {
    const receivedAt = new Date(Date.now() - ageMs);
    const record: RejectionRecord = {
      id: rejectionId(receivedAt, newClaimId()),
      filename,
      reason: 'schema',
      detail: 'events: must be array',
      received_at: receivedAt.toISOString(),
    };
    const source = join(dataDir, `source-${record.id}`);
    await writeFile(source, '{"events":1}');
    await writeRejection(join(dataDir, 'rejected'), record, source);
    await createRejectionLog(redis, keys).record(record);
    return record;
  };

  const statusRejections = async (): Promise<string[]> => {
    const res = await runCli(env, ['status', '--json', '--rejections', '100']);
    return (JSON.parse(res.stdout) as { rejections: RejectionRecord[] }).rejections.map((r) => r.id);
  };

  beforeAll(async () => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    dataDir = await makeDataDir('e2e-cli');
    otherDir = await makeDataDir('e2e-cli-other');
    const config = join(dataDir, 'oddsfiles.yaml');
    await writeFile(config, 'ingest:\n  rejected_retention: 7d\n');
    env = baseEnv(dataDir, prefix, { ODDSFILES_CONFIG: config });
    await mkdir(join(dataDir, 'rejected'), { recursive: true });
    // Before the workers start: one past the retention, one within it.
    seeded.push(await seedRejection(10 * DAY), await seedRejection(DAY));
    svc = await startOddsfiles(env, ['start', '--roles', 'watcher,worker']);
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    redis?.disconnect();
    await dropPrefix(prefix);
  });

  it('workers remove rejected drops past ingest.rejected_retention, from REJECTED_DIR and from status', async () => {
    const [old, recent] = seeded;
    // Done at start (then hourly); logged once the folder and the log entry are gone.
    expect(await svc!.waitForLog((l) => l.msg === 'removed rejected drops past ingest.rejected_retention')).toMatchObject({ removed: 1 });
    const left = await readdir(join(dataDir, 'rejected'));
    expect(left).not.toContain(old!.id);
    expect(left).toContain(recent!.id);
    const listed = await statusRejections();
    expect(listed).toContain(recent!.id);
    expect(listed).not.toContain(old!.id);
  });

  it('rejected retry waits for each outcome and reports it like publish; status stops listing the retried rejection', async () => {
    const inbox = join(dataDir, 'inbox');
    const rejectedDir = join(dataDir, 'rejected');
    const rejectedOnce = async (): Promise<string> => {
      const before = new Set((await rejectionRecords(rejectedDir)).map((r) => r.id));
      await drop(inbox, FEED, '[1,2]');
      const found = await waitFor(
        async () => (await rejectionRecords(rejectedDir)).find((r) => r.filename === FEED && r.reason === 'not_an_object' && !before.has(r.id!)),
        20_000,
        'the drop rejected',
      );
      return found.id!;
    };

    // Fixed in REJECTED_DIR, then retried: published.
    const first = await rejectedOnce();
    expect(await statusRejections()).toContain(first);
    await writeFile(join(rejectedDir, first, FEED), tinyDoc('bluewater', 'soccer', new Date().toISOString()));
    const ok = await runCli(env, ['rejected', 'retry', first, '--json']);
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toEqual([{ id: first, filename: FEED, outcome: 'published', generated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) }]);
    expect(await statusRejections()).not.toContain(first);

    // Retried as it is: rejected again, under a new id, exit 1.
    const second = await rejectedOnce();
    const again = await runCli(env, ['rejected', 'retry', second, '--json']);
    expect(again.code).toBe(1);
    const [result] = JSON.parse(again.stdout) as Record<string, string>[];
    expect(result).toMatchObject({ id: second, filename: FEED, outcome: 'rejected', reason: 'not_an_object' });
    expect(result!.rejectionId).toMatch(/^\d{8}T\d{9}Z-/);
    expect(result!.rejectionId).not.toBe(second);
    const listed = await statusRejections();
    expect(listed).not.toContain(second);
    expect(listed).toContain(result!.rejectionId);

    // The text form: one line per drop, as publish prints it.
    const third = await rejectedOnce();
    const text = await runCli(env, ['rejected', 'retry', third]);
    expect(text.code).toBe(1);
    // The line starts with the id retried and ends with the one the new rejection is kept under.
    const [line, newId] = text.stdout.split('\tnew id ');
    expect(line).toBe(`${third}\t${FEED}\trejected\tnot_an_object: the top level is an array, not an object`);
    expect(newId).toMatch(/^\d{8}T\d{9}Z-\S+\n$/);
    expect(await statusRejections()).toContain(newId!.trim());
  });

  it('rejected purge --older-than removes old rejected drops and their status entries; --dry-run only lists them', async () => {
    const rejectedDir = join(dataDir, 'rejected');
    const old = await seedRejection(3 * DAY, 'site_live_redstone_soccer.json');
    const young = await seedRejection(3_600_000, 'site_live_goldcrest_soccer.json');

    const dry = await runCli(env, ['rejected', 'purge', '--older-than', '2d', '--dry-run']);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(`${old.id}\tsite_live_redstone_soccer.json\t${old.received_at}\n`);
    expect(dry.stdout).not.toContain(young.id);
    expect(dry.stdout).toContain(`would remove 1 rejected drop(s) received over 2d ago from ${rejectedDir}`);
    expect(await readdir(rejectedDir)).toContain(old.id);
    expect(await statusRejections()).toContain(old.id);

    const res = await runCli(env, ['rejected', 'purge', '--older-than', '2d', '--json']);
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout)).toEqual({
      rejectedDir,
      dryRun: false,
      removed: [{ id: old.id, filename: 'site_live_redstone_soccer.json', received_at: old.received_at }],
    });
    const left = await readdir(rejectedDir);
    expect(left).not.toContain(old.id);
    expect(left).toContain(young.id);
    const listed = await statusRejections();
    expect(listed).not.toContain(old.id);
    expect(listed).toContain(young.id);
  });

  it('run from another folder with a relative DATA_DIR: rejected list refuses naming the workers inbox; status says it, and refuses an inbox folder there', async () => {
    const otherEnv = { ...env, DATA_DIR: 'var' };
    const theirs = `${join(dataDir, 'inbox')} on ${hostname()}`;
    const list = await runCli(otherEnv, ['rejected', 'list'], 30_000, otherDir);
    expect(list.code).toBe(1);
    expect(list.stdout).toBe('');
    expect(list.stderr).toContain(`INBOX_DIR (${join(otherDir, 'var', 'inbox')}) is not the inbox the running workers watch (they watch ${theirs})`);

    const status = await runCli(otherEnv, ['status'], 30_000, otherDir);
    const folders = `inbox ${join(otherDir, 'var', 'inbox')} (NOT the inbox the running workers watch: they watch ${theirs}); rejected ${join(otherDir, 'var', 'rejected')}; run oddsfiles with the service's environment`;
    expect(status.stdout).toContain(`folders  ${folders}`);
    expect(status.stderr).toContain(`warning: ${folders}`);
    // With an inbox folder there that the workers do not watch: refused, as rejected list is.
    await mkdir(join(otherDir, 'var', 'inbox'), { recursive: true });
    const refused = await runCli(otherEnv, ['status'], 30_000, otherDir);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toContain(`INBOX_DIR (${join(otherDir, 'var', 'inbox')}) is not the inbox the running workers watch (they watch ${theirs})`);

    // With the service's environment: the folders it reads, absolute.
    const ours = await runCli(env, ['rejected', 'list']);
    expect(ours.code).toBe(0);
    expect(ours.stdout.startsWith(`REJECTED_DIR ${join(dataDir, 'rejected')}\n`)).toBe(true);
    const ourStatus = await runCli(env, ['status']);
    expect(ourStatus.stderr).toBe('');
    expect(ourStatus.stdout).toContain(`folders  inbox ${join(dataDir, 'inbox')} (watched by the running workers); rejected ${join(dataDir, 'rejected')}\n`);
  });
});

describe('oddsfiles commands without a worker, or without Redis', () => {
  const prefix = uniquePrefix('e2e-cli-idle');
  let svc: RunningOddsfiles | undefined;

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it('publish with no worker running times out saying what to check; the file is published once a worker starts', async () => {
    const dataDir = await makeDataDir('e2e-cli-idle');
    const env = baseEnv(dataDir, prefix);
    const file = join(dataDir, 'site_live_northwind_soccer.json');
    await writeFile(file, tinyDoc('northwind', 'soccer', new Date().toISOString()));
    const res = await runCli(env, ['publish', '--timeout', '2s', file]);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/^warning: no worker is running/);
    expect(res.stdout).toBe(
      `${file}\tunknown\ttimed out: no worker settled it within 2s: is \`oddsfiles start\` (worker role) running against this Redis/REDIS_PREFIX (${prefix})? the file stays queued and will be published when a worker takes it\n`,
    );
    svc = await startOddsfiles(env, ['start', '--roles', 'worker']);
    await svc.waitForLog((l) => l.msg === 'drop published' && l.filename === 'site_live_northwind_soccer.json');
  });

  it('Redis unreachable: status and start exit 1 with one line naming the server (not its password) and what to check', async () => {
    const port = await freePort();
    const dataDir = await makeDataDir('e2e-cli-noredis');
    const env = baseEnv(dataDir, uniquePrefix('e2e-cli-noredis'), { REDIS_URL: `redis://:hunter2@127.0.0.1:${port}` });
    const [status, start] = await Promise.all([runCli(env, ['status']), runCli(env, ['start', '--roles', 'worker'], 40_000)]);
    for (const [name, res] of Object.entries({ status, start })) {
      expect(res.code, name).toBe(1);
      const lines = res.stderr.trim().split('\n');
      expect(lines, `${name}: ${res.stderr}`).toHaveLength(1);
      expect(lines[0], name).toMatch(
        new RegExp(
          `^oddsfiles: cannot reach Redis at redis://127\\.0\\.0\\.1:${port} within \\d+ s \\(connect ECONNREFUSED[^)]*\\): is redis-server running there\\? Check REDIS_URL`,
        ),
      );
      expect(res.stderr + res.stdout, name).not.toContain('hunter2');
    }
  }, 60_000);
});

describe('Redis that takes the connection and never answers', () => {
  let silent: Server | undefined;
  afterAll(() => new Promise<void>((r) => (silent ? silent.close(() => r()) : r())));

  it('start exits 1 with one line saying so, within its connect timeout rather than after the shutdown timeouts too', async () => {
    const sockets: Socket[] = [];
    silent = createServer((s) => void sockets.push(s));
    await new Promise<void>((r) => silent!.listen(0, '127.0.0.1', r));
    const port = (silent.address() as AddressInfo).port;
    const dataDir = await makeDataDir('e2e-cli-silent');
    const env = baseEnv(dataDir, uniquePrefix('e2e-cli-silent'), { REDIS_URL: `redis://127.0.0.1:${port}` });
    const t0 = Date.now();
    const start = await runCli(env, ['start', '--roles', 'reader'], 60_000);
    const tookMs = Date.now() - t0;
    for (const s of sockets) s.destroy();
    expect(start.code).toBe(1);
    const lines = start.stderr.trim().split('\n');
    expect(lines, start.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(
        `^oddsfiles: Redis at redis://127\\.0\\.0\\.1:${port} took the connection but did not answer within \\d+ s: is it paused, overloaded or not a Redis server\\? Check REDIS_URL`,
      ),
    );
    // 10 s to connect; the stop then drops the silent connections at once (it waited ~13 s more for them).
    expect(tookMs).toBeLessThan(19_000);
  }, 70_000);
});

describe('oddsfiles mirror --help', () => {
  it('lists the exit codes, as the oddsfiles-mirror command of the client package does', async () => {
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
    const res = await runCli(env, ['mirror', '--help'], 60_000, process.cwd());
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/Exit codes: 0 done or stopped/);
    expect(res.stdout).toContain('a URL that redirects');
    const { MIRROR_USAGE } = await import('@oddsfiles/client/mirror');
    const notes = MIRROR_USAGE.slice(MIRROR_USAGE.indexOf('State ('));
    expect(res.stdout.replace(/\s+/g, ' ')).toContain(notes.replace(/\s+/g, ' ').trim());
  });
});
