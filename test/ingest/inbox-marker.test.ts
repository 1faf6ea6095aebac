/**
 * The inbox marker and its registration (src/ingest/drop-folder/inbox-marker.ts) on the real filesystem and
 * the real Redis: the marker is created once and reused (workers sharing the folder share its id),
 * a damaged or removed one is replaced; a registration is live while refreshed, lapses when it is
 * not (a crashed worker), and closing one worker's registration leaves the others' in place.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import {
  ensureInboxMarker,
  inboxMarkerPath,
  inboxWatched,
  readInboxMarker,
  startInboxRegistration,
  type InboxRegistration,
} from '../../src/ingest/drop-folder/inbox-marker.js';
import { redisKeys } from '../../src/redis/key-names.js';
import { capturingLogger } from '../helpers/log.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/service.js';

describe('the inbox marker and its registration', () => {
  const prefix = uniquePrefix('inbox-marker');
  const keys = redisKeys(prefix);
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  const { log, lines } = capturingLogger();
  const dirs: string[] = [];
  const registrations: InboxRegistration[] = [];

  afterAll(async () => {
    for (const r of registrations) await r.close();
    await dropPrefix(prefix);
    redis.disconnect();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  const inbox = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-inbox-marker-'));
    dirs.push(dir);
    return dir;
  };
  const register = async (inboxDir: string, opts: { ttlMs?: number; refreshMs?: number } = {}) => {
    const r = await startInboxRegistration({ inboxDir, redis, keys, log, ...opts });
    registrations.push(r);
    return r;
  };

  it('creates the marker once and reuses it: workers starting together share one id', async () => {
    const dir = await inbox();
    expect(await readInboxMarker(dir)).toBeUndefined();
    const ids = await Promise.all(Array.from({ length: 8 }, () => ensureInboxMarker(dir)));
    expect(new Set(ids).size).toBe(1);
    expect(ids[0]).toMatch(/^[0-9a-f]{32}$/);
    expect((await readFile(inboxMarkerPath(dir), 'utf8')).trim()).toBe(ids[0]);
    expect(await ensureInboxMarker(dir)).toBe(ids[0]);
    expect(await readInboxMarker(dir)).toBe(ids[0]);
  });

  it('replaces a marker that holds no id', async () => {
    const dir = await inbox();
    await writeFile(inboxMarkerPath(dir), 'not an id\n');
    expect(await readInboxMarker(dir)).toBeUndefined();
    const id = await ensureInboxMarker(dir);
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(await readInboxMarker(dir)).toBe(id);
  });

  it("registers the marker's id live with a TTL; one worker closing leaves the other's registration", async () => {
    const dir = await inbox();
    const a = await register(dir);
    const b = await register(dir);
    const id = (await readInboxMarker(dir))!;
    expect(a.id).toBe(id);
    expect(b.id).toBe(id);
    expect(await inboxWatched(redis, keys, id)).toBe(true);
    expect((await redis.zrange(keys.inbox(id), 0, -1)).sort()).toEqual([a.member, b.member].sort());
    const ttl = await redis.pttl(keys.inbox(id));
    expect(ttl).toBeGreaterThan(50_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
    expect(lines.some((l) => l.msg === 'registered the inbox this worker watches' && l.inboxId === id && l.inbox === dir)).toBe(true);

    await a.close();
    expect(await inboxWatched(redis, keys, id)).toBe(true);
    await b.close();
    expect(await inboxWatched(redis, keys, id)).toBe(false);
    expect(await redis.exists(keys.inbox(id))).toBe(0);
    // Another inbox's id, or an id nobody registered, is not watched.
    expect(await inboxWatched(redis, keys, '0'.repeat(32))).toBe(false);
  });

  it('keeps a registration alive by refreshing it, and lets it lapse when nothing refreshes it (a crashed worker)', async () => {
    const refreshed = await register(await inbox(), { ttlMs: 400, refreshMs: 100 });
    const crashed = await register(await inbox(), { ttlMs: 400, refreshMs: 3_600_000 });
    expect(await inboxWatched(redis, keys, refreshed.id!)).toBe(true);
    expect(await inboxWatched(redis, keys, crashed.id!)).toBe(true);
    await new Promise((r) => setTimeout(r, 900));
    expect(await inboxWatched(redis, keys, refreshed.id!)).toBe(true);
    expect(await inboxWatched(redis, keys, crashed.id!)).toBe(false);
    expect(await redis.exists(keys.inbox(crashed.id!))).toBe(0);
  });

  it('writes the marker again when it was removed, and moves the registration to its new id', async () => {
    const dir = await inbox();
    const r = await register(dir);
    const before = r.id!;
    await rm(inboxMarkerPath(dir));
    await r.refresh();
    const after = (await readInboxMarker(dir))!;
    expect(after).toMatch(/^[0-9a-f]{32}$/);
    expect(after).not.toBe(before);
    expect(r.id).toBe(after);
    expect(await inboxWatched(redis, keys, after)).toBe(true);
    expect(await inboxWatched(redis, keys, before)).toBe(false);
  });

  it('a registration that cannot be made (the inbox is gone) is logged and made once it can', async () => {
    const dir = join(await inbox(), 'not-yet');
    const r = await register(dir, { refreshMs: 50 });
    expect(r.id).toBeUndefined();
    expect(lines.some((l) => l.level === 40 && l.inbox === dir && String(l.msg).startsWith('could not register the inbox'))).toBe(true);
    const { mkdir } = await import('node:fs/promises');
    await mkdir(dir);
    const id = await waitFor(() => r.id, 5000, 'the registration made');
    expect(await inboxWatched(redis, keys, id)).toBe(true);
  });
});
