/**
 * Drops written in place at the limits of `ingest.settle_max`, with short settings (settle 1s,
 * settle_max 2s, rescan 500ms): a writer that goes on changing a file that never parses is
 * rejected once settle_max has passed, with a detail that says so; the rejection is withdrawn
 * and the file read again for as long as the writer goes on, and the rejection of the whole file
 * stands once it stops. A rejected file's parked claim that stays quiet is deleted after
 * settle_max while the rejection stays; writes after that are lost.
 */
import { access, open, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RejectionRecord } from '../../../src/ingest/rejections/rejected.js';
import { EXAMPLE_FEEDS, generateDocument } from '../../fixtures/corpus.js';
import { pendingDrops, rejectionRecords } from '../../helpers/drops.js';
import { readCatalog } from '../../helpers/published.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const SETTLE_MAX_MS = 2000;
/** What settle.ts appends to the detail of a file still changing after settle_max (2s here). */
const STILL_WRITTEN = '(still being written after 2s)';

describe('drops written in place, at the settle_max limits', () => {
  const prefix = uniquePrefix('e2e-inplace-limits');
  let svc: RunningOddsfiles;
  let env: Record<string, string>;
  let dataDir: string;
  let inbox: string;
  let rejectedDir: string;

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-inplace-limits');
    inbox = join(dataDir, 'inbox');
    rejectedDir = join(dataDir, 'rejected');
    const configFile = join(dataDir, 'oddsfiles.yaml');
    await writeFile(configFile, 'ingest:\n  settle: 1s\n  settle_max: 2s\n  rescan: 500ms\n');
    env = baseEnv(dataDir, prefix, { ODDSFILES_CONFIG: configFile });
    svc = await startOddsfiles(env);
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  const rejectionsOf = async (name: string) => (await rejectionRecords(rejectedDir)).filter((r) => r.filename === name);
  const statusRejections = async (): Promise<RejectionRecord[]> => {
    const res = await runCli(env, ['status', '--json', '--rejections', '100']);
    return (JSON.parse(res.stdout) as { rejections: RejectionRecord[] }).rejections;
  };
  const exists = (path: string) =>
    access(path).then(
      () => true,
      () => false,
    );

  it('rejects a file still changing after settle_max with that detail, withdraws it while the writer goes on, and keeps the rejection of the whole file', async () => {
    const name = 'site_live_redstone_soccer.json';
    const fh = await open(join(inbox, name), 'w');
    const t0 = Date.now();
    let cappedAt = 0;
    const capped = svc
      .waitForLog((l) => l.filename === name && l.outcome === 'rejected' && String(l.detail).endsWith(STILL_WRITTEN), 20_000)
      .then((l) => ((cappedAt = Date.now()), l));
    // Never a complete document: one more event every 300 ms (within settle) for 5.5 s. At the
    // deadline the file is most often unchanged since it was last read: not quiet for settle all the same.
    let content = '{"bookmaker":"redstone","events":[';
    await fh.write(content);
    while (Date.now() - t0 < 5500) {
      await fh.write('{"event_id":"x"},');
      content += '{"event_id":"x"},';
      await sleep(300);
    }
    await fh.close();
    const stoppedAt = Date.now();

    // Rejected while the writer was still writing, not before settle_max.
    const first = await capped;
    expect(first.reason).toBe('invalid_json');
    expect(cappedAt - t0).toBeGreaterThanOrEqual(SETTLE_MAX_MS);
    expect(cappedAt).toBeLessThan(stoppedAt);
    // The writer went on: that rejection was withdrawn and the file read again.
    await svc.waitForLog((l) => l.rejectionId === first.rejectionId && /withdrawn/.test(String(l.msg)), 10_000);

    // Once the writer stops, it is rejected once more (quiet for settle: no settle_max detail), on
    // the whole file, and that rejection stands.
    const final = await waitFor(
      async () => {
        const recs = await rejectionsOf(name);
        if (recs.length !== 1 || (await pendingDrops(inbox)).length > 0) return undefined;
        const kept = await readFile(join(rejectedDir, recs[0]!.id!, name), 'utf8');
        return kept === content ? (recs[0] as unknown as RejectionRecord) : undefined;
      },
      20_000,
      'the last rejection',
    );
    await sleep(1500); // three rescans: nothing withdraws it
    expect((await rejectionsOf(name)).map((r) => r.id)).toEqual([final.id]);
    expect(await readFile(join(rejectedDir, final.id, name), 'utf8')).toBe(content);
    expect(final.reason).toBe('invalid_json');
    expect(final.detail).not.toContain('still being written');

    // Every rejection before it was withdrawn, and `status` lists only the one that stands.
    const rejectedIds = svc.logs.filter((l) => l.filename === name && l.outcome === 'rejected').map((l) => String(l.rejectionId));
    expect(rejectedIds.length).toBeGreaterThanOrEqual(2);
    expect(rejectedIds.at(-1)).toBe(final.id);
    const withdrawn = new Set(svc.logs.filter((l) => /withdrawn/.test(String(l.msg))).map((l) => String(l.rejectionId)));
    for (const id of rejectedIds.slice(0, -1)) expect(withdrawn.has(id), id).toBe(true);
    // Each of those was cut short by settle_max, and says so.
    const details = svc.logs.filter((l) => l.filename === name && l.outcome === 'rejected').map((l) => String(l.detail));
    for (const d of details.slice(0, -1)) expect(d).toMatch(/^unexpected end of input at byte \d+ \(still being written after 2s\)$/);
    expect(withdrawn.has(final.id)).toBe(false);
    expect((await statusRejections()).filter((r) => r.filename === name).map((r) => r.id)).toEqual([final.id]);
  });

  it('deletes a parked file quiet for settle_max and keeps its rejection; writes after that are lost', async () => {
    const feed = EXAMPLE_FEEDS.find((f) => f.filename === 'site_live_redstone_tennis.json')!;
    const bytes = generateDocument(feed, { generatedAt: '2026-11-21T19:00:00Z', targetBytes: 20_000 });
    const name = feed.filename;
    const fh = await open(join(inbox, name), 'w');
    await fh.write(bytes.subarray(0, 5000));
    const line = await svc.waitForLog((l) => l.filename === name && l.outcome === 'rejected', 20_000);
    const rejectedAt = Date.now();
    const id = String(line.rejectionId);
    const parked = join(inbox, '.rejected-watch', id);
    expect((await stat(parked)).size).toBe(5000);

    // Quiet: removed after settle_max (not at the next rescan, 500 ms away)...
    await waitFor(async () => !(await exists(parked)), 10_000, 'the parked file removed', 20);
    expect(Date.now() - rejectedAt).toBeGreaterThanOrEqual(SETTLE_MAX_MS - 500);
    // ...while the rejection stays, in REJECTED_DIR and in `status`.
    expect(await readFile(join(rejectedDir, id, name))).toEqual(bytes.subarray(0, 5000));
    expect((await rejectionsOf(name)).map((r) => r.id)).toEqual([id]);
    expect((await statusRejections()).map((r) => r.id)).toContain(id);

    // The writer finishing now writes into a file no longer in any folder: lost.
    await fh.write(bytes.subarray(5000));
    await fh.close();
    await sleep(1500); // three rescans
    expect((await readCatalog(prefix)).get(name)).toBeUndefined();
    expect((await rejectionsOf(name)).map((r) => r.id)).toEqual([id]);
    expect(await readdir(join(inbox, '.rejected-watch'))).not.toContain(id);
    expect(svc.logs.some((l) => l.rejectionId === id && /withdrawn/.test(String(l.msg)))).toBe(false);
    expect((await statusRejections()).map((r) => r.id)).toContain(id);
  });
});
