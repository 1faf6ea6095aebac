/**
 * `oddsfiles mirror` on a terminal: run under a pseudo-terminal (util-linux `script`), against
 * `oddsfiles start` and real Redis. It keeps one progress line, rewritten in place for each change
 * (the file, its lag and how it came), clears it before a message (the service restarted: the
 * stream is reconnected), and leaves the terminal clean when it stops. With `--json` a terminal
 * gets the JSON lines only.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drop } from '../../helpers/drops.js';
import { freePort } from '../../helpers/faults.js';
import { oddsVersions } from '../../helpers/mirror.js';
import { spawnTracked } from '../../helpers/processes.js';
import { dropPrefix, uniquePrefix } from '../../helpers/redis.js';
import { baseEnv, BIN, makeDataDir, runCli, startOddsfiles, waitFor, type RunningOddsfiles } from '../../helpers/service.js';

const NAME = 'site_live_northwind_soccer.json';
const CLEAR = '\r\x1b[K';
const etagOf = (b: Buffer) => `"${createHash('sha256').update(b).digest('hex').slice(0, 32)}"`;
const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const hasScript = (() => {
  try {
    execFileSync('script', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** `oddsfiles mirror ARGS` on a pseudo-terminal; everything it writes to the terminal (stdout and stderr) collected. */
function onTerminal(args: readonly string[], env: Record<string, string>) {
  const command = ['exec', quote(process.execPath), quote(BIN), 'mirror', ...args.map(quote)].join(' ');
  const proc = spawnTracked('script', ['-qfec', command, '/dev/null'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
  proc.stderr.resume();
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { proc, output: () => out, exited };
}

describe.skipIf(!hasScript)('oddsfiles mirror on a terminal', () => {
  const prefix = uniquePrefix('e2e-mirror-tty');
  let dataDir: string;
  let env: Record<string, string>;
  let svc: RunningOddsfiles | undefined;
  let url: string;
  let key: string;
  let clock = Date.now() - 3_600_000;
  const next = oddsVersions(NAME);
  const publish = async () => {
    clock += 1000;
    const bytes = next(clock);
    await drop(join(dataDir, 'inbox'), NAME, bytes);
    return bytes;
  };
  const served = (bytes: Buffer) =>
    waitFor(
      async () =>
        (await fetch(`${url}/v1/data/${NAME}`, { method: 'HEAD', headers: { 'x-api-key': key, 'accept-encoding': 'identity' } })).headers.get('etag') ===
        etagOf(bytes),
      30_000,
      'the version served',
    );

  beforeAll(async () => {
    dataDir = await makeDataDir('e2e-mirror-tty');
    await writeFile(
      join(dataDir, 'oddsfiles.yaml'),
      ['plans:', '  pro: { allow: ["*"], rate: { max: 100000, per: 1m } }', 'deltas: { max_wait: 30s }', ''].join('\n'),
    );
    env = baseEnv(dataDir, prefix, { PORT: String(await freePort()) });
    svc = await startOddsfiles(env);
    url = svc.url!;
    key = (await runCli(env, ['keys', 'create', '--name', 'consumer', '--plan', 'pro'])).stdout.trim();
    await served(await publish());
  }, 60_000);

  afterAll(async () => {
    await svc?.stop();
    await dropPrefix(prefix);
  });

  it('with --json, a terminal gets JSON lines only', async () => {
    const term = onTerminal(['--url', url, '--once', '--json', join(dataDir, 'json')], { PATH: process.env.PATH ?? '', ODDSFILES_KEY: key });
    expect(await term.exited, term.output()).toBe(0);
    expect(term.output()).not.toContain('\x1b');
    const lines = term.output().trim().split(/\r?\n/);
    expect(lines.map((l) => (JSON.parse(l) as { event: string }).event)).toEqual(['update', 'synced']);
  }, 60_000);

  it('keeps one progress line, rewritten for each change, cleared before a message and when it stops', async () => {
    const dir = join(dataDir, 'follow');
    const term = onTerminal(['--url', url, dir], { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ODDSFILES_KEY: key });
    const progress = () => term.output().split(CLEAR).slice(1);
    /** The folder holds `bytes` (the progress line is written right after the file). */
    const holds = (bytes: Buffer) => async () => (await readFile(join(dir, NAME)).catch(() => undefined))?.equals(bytes);
    await waitFor(() => progress().length > 0, 30_000, 'the first progress line');
    let last = await publish();
    await served(last);
    for (let i = 0; i < 2; i++) await served((last = await publish()));
    await waitFor(holds(last), 30_000, 'the last version in the folder');

    // Each change rewrites the line in place: no newline between them, each names the file, its lag and how it came.
    await waitFor(() => progress().length >= 2, 10_000, 'a progress line after the first');
    const lines = progress();
    for (const l of lines)
      expect(l).toMatch(new RegExp(`^1 files, position \\d+: ${NAME.replace(/\./g, '\\.')} -?\\d+ ms after publication \\((patch|whole), \\d+ B\\)$`));
    expect(
      lines.some((l) => l.includes('(patch,')),
      JSON.stringify(lines),
    ).toBe(true);

    // A message (the stream lost while the service restarts) starts on a cleared line, on a line of its own.
    expect(await svc!.stop()).toBe(0);
    svc = await startOddsfiles(env);
    await waitFor(() => /oddsfiles mirror: .*reconnecting in/.test(term.output()), 30_000, 'the reconnect message');
    expect(term.output()).toMatch(/\r\x1b\[Koddsfiles mirror: [^\r\n]*reconnecting in [\d.]+ s\r?\n/);
    const before = term.output().length;
    await served((last = await publish()));
    await waitFor(holds(last), 60_000, 'the version published after the restart in the folder');
    await waitFor(() => term.output().slice(before).includes(`${CLEAR}1 files, position `), 10_000, 'its progress line');
    // Once the stream is open again, it says so (on a line of its own).
    expect(term.output()).toMatch(/oddsfiles mirror: reconnected: following the changes again from position \d+\r?\n/);

    // Stopped (SIGTERM to the mirror itself, as from a terminal's job control): the line is cleared, nothing after it.
    const mirrorPid = Number((await readFile(`/proc/${term.proc.pid}/task/${term.proc.pid}/children`, 'utf8')).trim());
    process.kill(mirrorPid, 'SIGTERM');
    expect(await term.exited, term.output()).toBe(0);
    expect(JSON.stringify(term.output().slice(-300))).toMatch(/\\r\\u001b\[K"$/);
  }, 180_000);
});
