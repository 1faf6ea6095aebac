/**
 * The `oddsfiles` command as a checkout runs it: `npx oddsfiles …` from the project's folder runs
 * the package's own bin file directly (no node_modules/.bin link), so the build must leave
 * dist/bin/oddsfiles.js executable; tsc writes it without the execute bit.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BIN, ROOT } from '../../helpers/service.js';

describe('the built command', () => {
  it('is executable', () => {
    expect(() => accessSync(BIN, constants.X_OK)).not.toThrow();
  });

  it('runs as `npx oddsfiles` from the checkout', () => {
    const npx = spawnSync('npx', ['--no-install', 'oddsfiles', '--help'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(npx.status, npx.stderr).toBe(0);
    expect(npx.stdout).toMatch(/^Usage: oddsfiles/);
  }, 90_000);

  it('says in its help what a command requires and what it prints', () => {
    const help = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args, '--help'], { encoding: 'utf8' }).stdout.replace(/\s+/g, ' ');
    expect(help('keys', 'create')).toMatch(/--name <name> required:/);
    expect(help('keys', 'list')).toMatch(/publish patterns/);
  });
});
