/**
 * The asynchronous logger of `oddsfiles start` (src/log.ts, async: true) in a child process whose
 * stdout is a pipe, as in production: request lines are buffered, every other line goes out at
 * once, and whatever is buffered is written when the process exits, a crash included.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnTracked } from '../helpers/processes.js';

const LOG_MODULE = resolve(fileURLToPath(import.meta.url), '../../../src/log.ts');

interface Line {
  readonly at: number;
  readonly msg: string;
  readonly n?: number;
  readonly t?: string;
}

/** Run `body` (an ES module using `log`) and collect its stdout lines with their arrival times. */
function run(dir: string, name: string, body: string): Promise<{ lines: Line[]; code: number | null; startedAt: number }> {
  return (async () => {
    const file = join(dir, `${name}.mjs`);
    await writeFile(
      file,
      `const { createLogger, flushLogger } = await import(process.env.LOG_MODULE);\nconst log = createLogger({ level: 'info', async: true, pretty: false });\n${body}\n`,
    );
    const startedAt = Date.now();
    const child = spawnTracked(process.execPath, ['--import', 'tsx', file], { env: { ...process.env, LOG_MODULE }, stdio: ['ignore', 'pipe', 'pipe'] });
    const lines: Line[] = [];
    let buf = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      buf += chunk;
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const l = JSON.parse(buf.slice(0, i)) as { msg: string; n?: number; t?: string };
        lines.push({ at: Date.now(), msg: l.msg, ...(l.n !== undefined ? { n: l.n } : {}), ...(l.t !== undefined ? { t: l.t } : {}) });
        buf = buf.slice(i + 1);
      }
    });
    child.stderr.resume();
    const code = await new Promise<number | null>((res) => child.once('close', (c) => res(c)));
    return { lines, code, startedAt };
  })();
}

describe('asynchronous logging (start, stdout not a terminal)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oddsfiles-log-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('holds request lines back, but not the others, and writes everything before exiting', async () => {
    const { lines, code } = await run(
      dir,
      'prompt',
      `
      log.info({ n: 1 }, 'request');
      await new Promise((r) => setTimeout(r, 100));
            log.info({ n: 2 }, 'operational');
      await new Promise((r) => setTimeout(r, 300));
      log.info({ n: 3 }, 'request');
      await new Promise((r) => setTimeout(r, 5000));
      log.info({ n: 4 }, 'request');
      log.info({ n: 5 }, 'stopped');
      await flushLogger(log);
      `,
    );
    expect(code).toBe(0);
    expect(lines.map((l) => l.n)).toEqual([1, 2, 3, 4, 5]);
    // The first request line went out with the operational line that followed it, not before.
    const [first, operational, third] = lines;
    expect(operational!.at - first!.at).toBeLessThan(50);
    // The third (a request line alone, 300 ms after the operational one) waited for the periodic
    // flush, a second after the logger was made: not for the next line, 5 s later.
    expect(third!.at - operational!.at).toBeGreaterThanOrEqual(600);
    expect(third!.at - operational!.at).toBeLessThan(5000);
  });

  it('keeps every line whole and in order through many buffered writes, multi-byte text included', async () => {
    // Far more than one write's worth (sonic-boom writes at most 16 KiB at a time), with text whose
    // UTF-8 bytes outnumber its characters: the buffer is counted in bytes, not characters.
    const { lines, code } = await run(
      dir,
      'many',
      `
      for (let n = 0; n < 3000; n++) {
        log.info({ n, t: 'Zürich–Genève ⚽ 😀 ' + n }, 'request');
        if (n % 100 === 99) await new Promise((r) => setImmediate(r));
      }
      await flushLogger(log);
      `,
    );
    expect(code).toBe(0);
    expect(lines.map((l) => l.n)).toEqual(Array.from({ length: 3000 }, (_, n) => n));
    expect(lines.every((l) => l.t === `Zürich–Genève ⚽ 😀 ${l.n}`)).toBe(true);
  });

  it('writes buffered request lines when the process crashes', async () => {
    const { lines, code } = await run(
      dir,
      'crash',
      `
      for (let n = 0; n < 5; n++) log.info({ n }, 'request');
      setTimeout(() => { throw new Error('boom'); }, 50);
      `,
    );
    expect(code).not.toBe(0);
    expect(lines.map((l) => l.n)).toEqual([0, 1, 2, 3, 4]);
  });

  it('writes them on process.exit too (the second signal of start)', async () => {
    const { lines, code } = await run(
      dir,
      'exit',
      `log.info({ n: 7 }, 'request'); log.warn({ n: 8 }, 'second signal: exiting now'); log.info({ n: 9 }, 'request'); process.exit(1);`,
    );
    expect(code).toBe(1);
    // All there; the order may differ when an asynchronous write was under way at the exit (the
    // exit handler writes the rest synchronously meanwhile: a limit of pino's async destination).
    expect(lines.map((l) => l.n).sort()).toEqual([7, 8, 9]);
  });
});
