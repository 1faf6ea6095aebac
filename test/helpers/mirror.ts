/**
 * `oddsfiles mirror` as a child process (the built command, tracked like every child), its JSON
 * lines and stderr collected; and realistic odds documents laid out as JSON.stringify(doc, null, 2)
 * writes them, so that patched versions can be rebuilt byte for byte.
 */
import type { ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EXAMPLE_FEEDS, generateDocument } from '../fixtures/corpus.js';
import { onJsonLines } from './json-lines.js';
import { spawnTracked } from './processes.js';
import { BIN } from './service.js';

export type MirrorLine = Record<string, unknown> & { event: string };

export interface RunningMirror {
  readonly proc: ChildProcess;
  readonly lines: MirrorLine[];
  stderr(): string;
  /** Resolves with the first line (from index `from`) `pred` accepts. */
  waitForLine(pred: (l: MirrorLine) => boolean, timeoutMs?: number, from?: number): Promise<MirrorLine>;
  /** Resolves when stderr matches. */
  waitForStderr(re: RegExp, timeoutMs?: number): Promise<void>;
  readonly exited: Promise<number | null>;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

export function startMirror(args: readonly string[], env: Record<string, string>, bin: readonly string[] = [BIN, 'mirror']): RunningMirror {
  const proc = spawnTracked(process.execPath, [...bin, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: MirrorLine[] = [];
  let stderr = '';
  const waiters = new Set<() => void>();
  onJsonLines<MirrorLine>(
    proc.stdout,
    (line) => ({ event: 'text', text: line }),
    (l) => {
      lines.push(l);
      waiters.forEach((w) => w());
    },
  );
  proc.stderr.setEncoding('utf8').on('data', (c: string) => {
    stderr += c;
    waiters.forEach((w) => w());
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code, signal) => resolve(code ?? (signal ? -1 : null))));
  let done = false;
  void exited.then(() => {
    done = true;
    waiters.forEach((w) => w());
  });
  const until = (ok: () => boolean, timeoutMs: number, what: () => string) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (ok()) {
          finish();
          resolve();
        } else if (done) {
          finish();
          reject(new Error(`the mirror exited before ${what()}; stderr: ${stderr.slice(-2000)}`));
        }
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`timed out waiting for ${what()}; stderr: ${stderr.slice(-2000)}; last lines: ${JSON.stringify(lines.slice(-3))}`));
      }, timeoutMs);
      const finish = () => {
        clearTimeout(timer);
        waiters.delete(check);
      };
      waiters.add(check);
      check();
    });
  return {
    proc,
    lines,
    stderr: () => stderr,
    async waitForLine(pred, timeoutMs = 30_000, from = 0) {
      let hit: MirrorLine | undefined;
      await until(
        () => (hit = lines.slice(from).find(pred)) !== undefined,
        timeoutMs,
        () => 'a mirror line',
      );
      return hit!;
    },
    waitForStderr: (re, timeoutMs = 30_000) =>
      until(
        () => re.test(stderr),
        timeoutMs,
        () => `stderr matching ${re}`,
      ),
    exited,
    async kill(signal = 'SIGTERM') {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill(signal);
      return exited;
    },
  };
}

type Doc = { generated_at: string; events: { markets: { selections: { odds: number }[] }[] }[] };

/** Versions of one feed's live document: each a later generated_at and every `every`-th price moved. */
export function oddsVersions(filename: string, targetBytes = 20_000) {
  const feed = EXAMPLE_FEEDS.find((f) => f.filename === filename) ?? { ...EXAMPLE_FEEDS.find((f) => f.kind === 'live')!, filename };
  const doc = JSON.parse(generateDocument(feed, { targetBytes }).toString('utf8')) as Doc;
  let n = 0;
  return (generatedAtMs: number, every = 20): Buffer => {
    n++;
    doc.generated_at = new Date(generatedAtMs).toISOString();
    let i = 0;
    for (const e of doc.events)
      for (const m of e.markets) for (const s of m.selections) if ((i++ + n) % every === 0) s.odds = Math.round(s.odds * 100 + 1) / 100;
    return Buffer.from(JSON.stringify(doc, null, 2));
  };
}

/** The files of a mirror folder, by name (the state file and temp files left out). */
export async function mirrored(dir: string, names: readonly string[]): Promise<Record<string, Buffer | undefined>> {
  const out: Record<string, Buffer | undefined> = {};
  for (const n of names) out[n] = await readFile(join(dir, n)).catch(() => undefined);
  return out;
}
