/**
 * Documents must be I-JSON (RFC 7493), end to end: `oddsfiles start` as a child process; a number
 * past a double, a lone surrogate and a member name twice are rejected with `not_i_json` and a
 * detail naming the byte, dropped in the folder (reason.json in REJECTED_DIR) and over PUT (422,
 * also on a dry run), and nothing of them is published.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drop, rejectionRecords } from '../../helpers/drops.js';
import { readCatalog } from '../../helpers/published.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const FILES = ['site_live_northwind_soccer.json', 'site_pregame_northwind_soccer.json', 'site_live_northwind_tennis.json'];
const head = (sport: string) => `{"bookmaker":"northwind","sport":"${sport}","generated_at":"${new Date(Date.now() - 60_000).toISOString()}",`;
const sportOf = (name: string) => name.replace(/^.*_/, '').replace('.json', '');

/** Each violation, its document for a filename, and the detail it must give. */
const CASES = [
  {
    what: 'a number past a double',
    body: (n: string) => `${head(sportOf(n))}"events":[{"event_id":"e1","line":1e400}]}`,
    detail: /^the number 1e400 at byte \d+ does not fit an IEEE 754 double$/,
  },
  { what: 'a negative one', body: (n: string) => `${head(sportOf(n))}"events":[{"event_id":"e1","line":-1e400}]}`, detail: /^the number -1e400 at byte \d+/ },
  {
    what: 'a lone surrogate',
    body: (n: string) => `${head(sportOf(n))}"events":[{"event_id":"e1","name":"\\ud800"}]}`,
    detail: /^a lone surrogate \\ud800 in a string at byte \d+$/,
  },
  {
    what: 'a member name twice',
    body: (n: string) => `${head(sportOf(n))}"events":[{"event_id":"e1","event_id":"e2"}]}`,
    detail: /^the member name "event_id" appears twice in an object \(again at byte \d+\)$/,
  },
];

describe('I-JSON end to end', () => {
  const prefix = uniquePrefix('e2e-ijson');
  let dataDir: string;
  let env: Record<string, string>;
  let svc: RunningOddsfiles;
  let publisher = '';

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-ijson');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), 'sports: [soccer, tennis]\n');
    env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    const res = await runCli(env, ['keys', 'create', '--name', 'nw', '--publish', 'site_*_northwind*']);
    expect(res.code, res.stderr).toBe(0);
    publisher = res.stdout.trim();
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it.each(CASES)('$what: a drop is rejected with not_i_json and a detail naming the byte', async ({ body, detail }) => {
    const name = FILES[0]!;
    const before = (await rejectionRecords(join(dataDir, 'rejected'))).length;
    await drop(join(dataDir, 'inbox'), name, body(name));
    const records = await waitFor(async () => {
      const all = await rejectionRecords(join(dataDir, 'rejected'));
      return all.length > before ? all : undefined;
    });
    const record = records.find((r) => r.filename === name && detail.test(r.detail ?? ''));
    expect(record, JSON.stringify(records)).toMatchObject({ reason: 'not_i_json' });
  });

  it.each(CASES)('$what: a PUT answers 422 not_i_json (a dry run too)', async ({ body, detail }) => {
    const name = FILES[1]!;
    for (const query of ['', '?dry_run=1']) {
      const res = await fetch(`${svc.url}/v1/data/${name}${query}`, {
        method: 'PUT',
        headers: { 'x-api-key': publisher, 'content-type': 'application/json' },
        body: body(name),
      });
      const problem = (await res.json()) as Record<string, string>;
      expect(res.status, JSON.stringify(problem)).toBe(422);
      expect(problem).toMatchObject({ type: 'https://oddsfiles.dev/problems/rejected', reason: 'not_i_json', outcome: 'rejected' });
      expect(problem.detail).toMatch(detail);
    }
  });

  it('the same documents without the violation are published; none of the rejected ones is', async () => {
    const name = FILES[2]!;
    const good = `${head('tennis')}"events":[{"event_id":"e1","line":1e300,"name":"\\ud83d\\ude00"}]}`;
    const res = await fetch(`${svc.url}/v1/data/${name}`, { method: 'PUT', headers: { 'x-api-key': publisher }, body: good });
    expect(res.status).toBe(201);
    const catalog = await readCatalog(prefix);
    expect([...catalog.keys()]).toEqual([name]);
  });
});
