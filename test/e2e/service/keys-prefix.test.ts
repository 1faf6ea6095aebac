/**
 * `keys create` under a Redis prefix that nothing serves: the key is made (exit 0, printed alone
 * on stdout) and stderr warns, naming the prefix; under a prefix where a process of any one role
 * (reader, worker, watcher) runs, or ran within the last minute, there is no warning. The key
 * made under a prefix nobody serves is indeed refused by a reader of another prefix.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles, type RunningOddsfiles } from '../../helpers/service.js';

const WARNING = /warning: no oddsfiles process has run under REDIS_PREFIX "([^"]+)"/;

describe('keys create warns when no process serves its prefix', () => {
  const prefixes: string[] = [];
  const running: RunningOddsfiles[] = [];
  const prefix = (label: string) => {
    const p = uniquePrefix(`e2e-keys-${label}`);
    prefixes.push(p);
    return p;
  };
  const create = async (env: Record<string, string>, name: string) => {
    const res = await runCli(env, ['keys', 'create', '--name', name, '--plan', 'pro']);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout.trim()).toMatch(/^odf_[A-Za-z0-9_-]{43}$/);
    return res;
  };

  afterAll(async () => {
    for (const svc of running) await svc.kill();
    for (const p of prefixes) await dropPrefix(p);
  });

  it('warns on stderr, after making the key, where nothing runs; that key is refused by the readers of another prefix', async () => {
    const dataDir = await makeDataDir('e2e-keys');
    const served = baseEnv(dataDir, prefix('served'));
    const svc = await startOddsfiles(served, ['start', '--roles', 'reader']);
    running.push(svc);
    const stray = baseEnv(dataDir, prefix('stray'));
    const res = await create(stray, 'stray');
    expect(res.stderr).toMatch(WARNING);
    expect(WARNING.exec(res.stderr)![1]).toBe(stray.REDIS_PREFIX);
    expect((await fetch(`${svc.url}/v1/files`, { headers: { 'x-api-key': res.stdout.trim() } })).status).toBe(401);
    // Under the prefix the reader serves: no warning, and the key works.
    const ok = await create(served, 'served');
    expect(ok.stderr).not.toMatch(WARNING);
    expect((await fetch(`${svc.url}/v1/files`, { headers: { 'x-api-key': ok.stdout.trim() } })).status).toBe(200);
  }, 60_000);

  for (const role of ['worker', 'watcher']) {
    it(`does not warn where only a ${role} runs, nor just after it stopped`, async () => {
      const env = baseEnv(await makeDataDir(`e2e-keys-${role}`), prefix(role));
      expect((await create(env, 'before')).stderr).toMatch(WARNING);
      const svc = await startOddsfiles(env, ['start', '--roles', role]);
      running.push(svc);
      expect((await create(env, 'during')).stderr).not.toMatch(WARNING);
      expect(await svc.stop()).toBe(0);
      // A restart in progress is not "nothing serves this prefix".
      expect((await create(env, 'after')).stderr).not.toMatch(WARNING);
    }, 60_000);
  }
});
