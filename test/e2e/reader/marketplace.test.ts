/**
 * Marketplace traffic over real HTTP against `oddsfiles start`: the proxy secret
 * authenticates the subscriber named by the user header on the plan mapped from the
 * subscription header (X-API-Key is not looked up); a wrong secret is 401 (and counts as a failed
 * authentication of the address); no subscriber is 401; an unmapped plan is 403; rate limits
 * count per subscriber. The secret never shows in a response or a log line.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drop, tinyDoc } from '../../helpers/drops.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const LIVE = 'site_live_northwind_soccer.json';
const PREGAME = 'site_pregame_northwind_soccer.json';
const UNPUBLISHED = 'site_pregame_bluewater_tennis.json';
const SECRET = 'mkt-proxy-s3cret-9c1f2e';

const CONFIG = `
plans:
  free: { allow: ["site_pregame_*"], rate: { max: 5, per: 1m } }
  pro:  { allow: ["*"], rate: { max: 50, per: 1m } }
marketplaces:
  - name: rapidapi
    secret_header: X-RapidAPI-Proxy-Secret
    secret: "${SECRET}"
    user_header: X-RapidAPI-User
    plan_header: X-RapidAPI-Subscription
    plans: { BASIC: free, PRO: pro, ULTRA: pro }
reader:
  trust_proxy: true
  auth_failures: { max: 3, per: 1m }
`;

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

describe('marketplace subscribers', () => {
  const prefix = uniquePrefix('marketplace');
  let svc: RunningOddsfiles;
  let apiKey: string;
  const answers: Answer[] = [];
  let n = 0;
  const client = () => ({ 'x-forwarded-for': `192.0.2.${++n}` });

  const get = async (path: string, headers: Record<string, string> = {}): Promise<Answer> => {
    const res = await fetch(`${svc.url}${path}`, { headers });
    const a = { status: res.status, headers: res.headers, body: await res.text() };
    answers.push(a);
    return a;
  };
  const via = (user: string | undefined, plan: string | undefined, secret = SECRET): Record<string, string> => ({
    'x-rapidapi-proxy-secret': secret,
    ...(user === undefined ? {} : { 'x-rapidapi-user': user }),
    ...(plan === undefined ? {} : { 'x-rapidapi-subscription': plan }),
    // The marketplace forwards the subscriber's own dashboard key: not ours to look up.
    'x-api-key': 'their-dashboard-key-3f9a',
    'x-rapidapi-host': 'odds.p.rapidapi.com',
  });
  const problem = (a: Answer, status: number) => {
    expect(a.status).toBe(status);
    expect(a.headers.get('content-type')).toBe('application/problem+json');
    return JSON.parse(a.body) as { detail: string };
  };

  beforeAll(async () => {
    const dataDir = await makeDataDir('marketplace');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), CONFIG);
    const env = baseEnv(dataDir, prefix);
    svc = await startOddsfiles(env);
    const res = await runCli(env, ['keys', 'create', '--name', 'direct', '--plan', 'pro']);
    expect(res.code, res.stderr).toBe(0);
    apiKey = res.stdout.trim();
    const inbox = join(dataDir, 'inbox');
    await drop(inbox, LIVE, tinyDoc('northwind', 'soccer', '2026-01-01T00:00:00Z'));
    await drop(inbox, PREGAME, tinyDoc('northwind', 'soccer', '2026-01-01T00:00:00Z'));
    await waitFor(
      async () => {
        const r = await fetch(`${svc.url}/v1/files`, { headers: { 'x-api-key': apiKey } });
        return r.status === 200 && ((await r.json()) as { files: string[] }).files.length === 2;
      },
      20_000,
      'both files listed',
    );
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it('the right secret: the subscriber on the mapped plan, its allow-list, X-API-Key not looked up', async () => {
    const from = client();
    const basic = await get('/v1/files', { ...via('alice', 'BASIC'), ...from });
    expect(basic.status).toBe(200);
    expect(JSON.parse(basic.body)).toEqual({ files: [PREGAME] });
    expect(basic.headers.get('ratelimit-policy')).toBe('"free";q=5;w=60');
    const pro = await get('/v1/files', { ...via('bob', 'PRO'), ...from });
    expect(JSON.parse(pro.body)).toEqual({ files: [LIVE, PREGAME] });
    expect(pro.headers.get('ratelimit-policy')).toBe('"pro";q=50;w=60');
    // Downloads: allowed, not on the plan's allow-list (403), not published (404).
    const data = await get(`/v1/data/${PREGAME}`, { ...via('carol', 'BASIC'), ...from });
    expect(data.status).toBe(200);
    expect(JSON.parse(data.body)).toMatchObject({ bookmaker: 'northwind', sport: 'soccer' });
    problem(await get(`/v1/data/${LIVE}`, { ...via('carol', 'BASIC'), ...from }), 403);
    problem(await get(`/v1/data/${UNPUBLISHED}`, { ...via('carol', 'BASIC'), ...from }), 404);
    // Without any X-API-Key at all, too.
    const headers = via('dave', 'ULTRA');
    delete headers['x-api-key'];
    expect((await get(`/v1/data/${LIVE}`, { ...headers, ...from })).status).toBe(200);
  });

  it('a wrong secret is 401, even with a valid X-API-Key; an empty one too', async () => {
    const from = client();
    const wrong = problem(await get('/v1/files', { ...via('alice', 'BASIC', 'not-the-secret'), 'x-api-key': apiKey, ...from }), 401);
    expect(wrong.detail).toContain('proxy secret');
    problem(await get('/v1/files', { ...via('alice', 'BASIC', ''), ...from }), 401);
    // The same key without the marketplace headers is fine.
    expect((await get('/v1/files', { 'x-api-key': apiKey, ...client() })).status).toBe(200);
  });

  it('no subscriber header: 401; an unmapped or missing subscription plan: 403', async () => {
    const from = client();
    const noUser = problem(await get('/v1/files', { ...via(undefined, 'BASIC'), ...from }), 401);
    expect(noUser.detail).toContain('x-rapidapi-user');
    problem(await get('/v1/files', { ...via('   ', 'BASIC'), ...from }), 401);
    problem(await get('/v1/files', { ...via('alice', 'MEGA'), ...from }), 403);
    problem(await get(`/v1/data/${PREGAME}`, { ...via('alice', 'MEGA'), ...from }), 403);
    problem(await get('/v1/files', { ...via('alice', undefined), ...from }), 403);
    problem(await get('/v1/files', { ...via('alice', 'toString'), ...from }), 403);
  });

  it('rate limits count per subscriber', async () => {
    const from = client();
    const left: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await get('/v1/files', { ...via('erin', 'BASIC'), ...from });
      expect(res.status).toBe(200);
      left.push(res.headers.get('ratelimit-remaining')!);
    }
    expect(left).toEqual(['4', '3', '2', '1', '0']);
    const over = await get(`/v1/data/${PREGAME}`, { ...via('erin', 'BASIC'), ...from });
    problem(over, 429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(over.headers.get('ratelimit')).toMatch(/^"free";r=0;t=\d+$/);
    // Another subscriber through the same proxy address has its own count.
    const frank = await get('/v1/files', { ...via('frank', 'BASIC'), ...from });
    expect(frank.status).toBe(200);
    expect(frank.headers.get('ratelimit-remaining')).toBe('4');
    // A subscriber name that is not a plain word is counted too (hashed), separately.
    const odd = await get('/v1/files', { ...via('zoë / "quoted"', 'BASIC'), ...from });
    expect(odd.status).toBe(200);
    expect(odd.headers.get('ratelimit-remaining')).toBe('4');
  });

  it('wrong secrets count as failed authentications of the address; the right secret is not locked out', async () => {
    const from = client();
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await get('/v1/files', { ...via('mallory', 'PRO', `guess-${i}`), ...from })).status);
    expect(statuses).toEqual([401, 401, 401, 429]);
    // The marketplace itself (right secret) speaks for many subscribers from few addresses.
    expect((await get('/v1/files', { ...via('grace', 'PRO'), ...from })).status).toBe(200);
    // A valid direct key from that address is served; a wrong one is refused with 429.
    expect((await get('/v1/files', { 'x-api-key': apiKey, ...from })).status).toBe(200);
    problem(await get('/v1/files', { 'x-api-key': `odf_${'q'.repeat(43)}`, ...from }), 429);
  });

  it('the secret shows in no response and no log line', () => {
    expect(answers.length).toBeGreaterThan(20);
    for (const a of answers) expect(`${JSON.stringify([...a.headers])}${a.body}`).not.toContain(SECRET);
    expect(JSON.stringify(svc.logs)).not.toContain(SECRET);
    expect(JSON.stringify(svc.logs)).not.toContain(apiKey);
  });
});
