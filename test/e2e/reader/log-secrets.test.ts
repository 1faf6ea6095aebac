/**
 * No log line holds a secret sent in an address: `oddsfiles start` with an admin token, asked for
 * /metrics and /admin with the token (and other secrets) in the query string, on the usual
 * spellings of those paths, and on the API routes with `token`, `key` and `api_key` parameters,
 * also in a request Node itself refuses. The whole stdout is searched for each secret afterwards.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawRequest } from '../../helpers/raw-http.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, type LogLine, type RunningOddsfiles } from '../../helpers/service.js';

describe('secrets in request addresses are never logged', () => {
  const prefix = uniquePrefix('e2e-log-secrets');
  const adminToken = `admin-${randomBytes(16).toString('hex')}`;
  const secret = (label: string) => `${label}${randomBytes(12).toString('hex')}`;
  let svc: RunningOddsfiles;
  let lines: LogLine[] = [];
  let stdout = '';
  const secrets: string[] = [];
  const statuses = new Map<string, number>();

  beforeAll(async () => {
    const dataDir = await makeDataDir('e2e-log-secrets');
    svc = await startOddsfiles(baseEnv(dataDir, prefix, { ADMIN_TOKEN: adminToken }));
    const port = Number(new URL(svc.url!).port);
    const s = () => {
      const v = secret('s');
      secrets.push(v);
      return v;
    };
    const paths = [
      `/metrics?token=${adminToken}`,
      `/metrics?x=1&token=${s()}`,
      `/metrics/?token=${s()}`,
      `//metrics?token=${s()}`,
      `/METRICS?token=${s()}`,
      `/%6Detrics?token=${s()}`,
      `/admin/queues?token=${s()}`,
      `/admin/queues/api/queues?anything=${s()}`,
      `/admin?token=${s()}`,
      `/v1/files?token=${s()}&page=2`,
      `/v1/files?api_key=${s()}`,
      `/v1/data/site_live_northwind_soccer.json?key=${s()}`,
      `/v1/changes?since=0&API_KEY=${s()}`,
      `/v1/files?to%6Ben=${s()}`,
      `/nowhere?apikey=${s()}`,
    ];
    for (const path of paths) {
      const res = await rawRequest(port, `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
      statuses.set(path, res.status);
    }
    // A request Node refuses before Fastify sees it (headers too large): logged from its raw bytes.
    const refused = s();
    const big = await rawRequest(port, `GET /v1/files?key=${refused} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ${'a'.repeat(64 * 1024)}\r\n\r\n`);
    statuses.set('oversized', big.status);
    expect(await svc.stop()).toBe(0);
    lines = svc.logs;
    stdout = lines.map((l) => JSON.stringify(l)).join('\n');
  }, 90_000);

  afterAll(async () => {
    await svc?.kill();
    await dropPrefix(prefix);
  });

  it('answers the operator paths with the token in the address 401 (the token goes in Authorization)', () => {
    expect(statuses.get(`/metrics?token=${adminToken}`)).toBe(401);
    expect(statuses.get('oversized')).toBe(431);
  });

  it('writes a request line for each request, and no line holds any of the secrets', () => {
    const requests = lines.filter((l) => l.msg === 'request');
    expect(requests.length).toBeGreaterThanOrEqual(statuses.size);
    expect(stdout).not.toContain(adminToken);
    for (const v of secrets) expect(stdout).not.toContain(v);
    expect(svc.stderr()).not.toContain(adminToken);
  });

  it('withholds the whole query of /metrics and /admin, and only the secret parameters elsewhere', () => {
    const urls = lines.filter((l) => l.msg === 'request').map((l) => l.url as string);
    expect(urls).toContain('/metrics?[redacted]');
    expect(urls).toContain('/admin/queues/api/queues?[redacted]');
    expect(urls).toContain('/v1/files?token=[redacted]&page=2');
    expect(urls).toContain('/v1/changes?since=0&API_KEY=[redacted]');
    expect(urls).toContain('/v1/files?to%6Ben=[redacted]');
    expect(urls).toContain('/v1/files?key=[redacted]');
  });
});
