/**
 * A marketplace's proxy secret is the reader's business: with `secret_env` unset, the commands
 * that serve no marketplace traffic (`keys list`, a worker) run, and a reader refuses to start.
 * Over the real command.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, makeDataDir, runCli, startOddsfiles } from '../../helpers/service.js';

const MARKETPLACE_YAML = [
  'marketplaces:',
  '  - name: rapidapi',
  '    secret_header: X-RapidAPI-Proxy-Secret',
  '    secret_env: RAPIDAPI_PROXY_SECRET',
  '    user_header: X-RapidAPI-User',
  '    plan_header: X-RapidAPI-Subscription',
  '    plans: { BASIC: free }',
  '',
].join('\n');

describe('a marketplace secret that is not set', () => {
  const prefix = uniquePrefix('cli-secrets');
  let env: Record<string, string>;

  beforeAll(async () => {
    const dataDir = await makeDataDir('cli-secrets');
    await writeFile(join(dataDir, 'oddsfiles.yaml'), MARKETPLACE_YAML);
    env = baseEnv(dataDir, prefix);
  });

  afterAll(async () => {
    await dropPrefix(prefix);
  });

  it('does not stop the key commands', async () => {
    const created = await runCli(env, ['keys', 'create', '--name', 'acme', '--plan', 'free']);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/^odf_/);
    const listed = await runCli(env, ['keys', 'list']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain('acme');
  });

  it('does not stop a worker', async () => {
    const worker = await startOddsfiles(env, ['start', '--roles', 'worker']);
    expect(await worker.stop()).toBe(0);
  });

  it('stops a reader, naming the variable', async () => {
    const reader = await runCli(env, ['start', '--roles', 'reader'], 20_000);
    expect(reader.code).toBe(1);
    expect(reader.stderr).toMatch(/marketplaces\[0\]\.secret_env: environment variable RAPIDAPI_PROXY_SECRET is not set/);
  });
});
