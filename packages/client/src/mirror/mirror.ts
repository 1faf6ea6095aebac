/**
 * `oddsfiles mirror`: keeps DIR byte-identical to the current version of every file the key may
 * read (the identity bytes of GET /v1/data), through the client (../client.ts). Each file is
 * replaced atomically, then the state (position and versions) is written, so a restart resumes
 * where it stopped and does not fetch again what DIR holds. A file that leaves the key's list is
 * removed (kept with `keep`). A folder that cannot be written is reported and retried; after
 * `writeGiveUpMs` of failures the mirror stops with exit code 1.
 */
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { createClient, parseBaseUrl, type Change } from '../client.js';
import { OddsfilesClientError } from '../errors.js';
import { backoffMs, type Notice } from '../http.js';
import { ensureDir, removeFile, removeMadeDirs, removeStrayTemps, safeName, writeAtomic } from './dir.js';
import { heldVersions, readState, stateOf, STATE_FILE, writeState } from './state.js';

export const KEY_ENV = 'ODDSFILES_KEY';

export interface MirrorOptions {
  readonly url: string;
  /** The key; without it, `ODDSFILES_KEY` from `env`. */
  readonly key?: string | undefined;
  readonly dir: string;
  readonly conflateMs?: number | undefined;
  /** A shell command run after each change, with ODDSFILES_* in its environment. */
  readonly exec?: string | undefined;
  /** Sync once and return. */
  readonly once?: boolean | undefined;
  /** One JSON line per change on stdout. */
  readonly json?: boolean | undefined;
  /** Keep files that leave the key's list. */
  readonly keep?: boolean | undefined;
  /** How long writes to DIR may keep failing before the mirror gives up (default 2 minutes; 5 s with `once`). */
  readonly writeGiveUpMs?: number | undefined;
  readonly relistMs?: number | undefined;
}

export interface MirrorIO {
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean };
  readonly stderr: NodeJS.WritableStream;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** Aborted: finish the change in hand, write the state, return 0. */
  readonly signal?: AbortSignal | undefined;
  readonly fetch?: typeof fetch | undefined;
}

/** Exit codes: 0 done (or stopped), 1 cannot go on, 2 bad usage. */
export async function runMirror(opts: MirrorOptions, io: MirrorIO): Promise<number> {
  const say = (line: string) => io.stderr.write(`oddsfiles mirror: ${line}\n`);
  const key = opts.key ?? io.env[KEY_ENV];
  if (!key) {
    say(`give the key with --key or in ${KEY_ENV}`);
    return 2;
  }
  let base: URL;
  try {
    base = parseBaseUrl(opts.url);
  } catch (err) {
    say((err as Error).message);
    return 2;
  }
  if (opts.conflateMs !== undefined && (!Number.isInteger(opts.conflateMs) || opts.conflateMs < 0 || opts.conflateMs > 60_000)) {
    say('--conflate is a whole number of milliseconds from 0 to 60000');
    return 2;
  }
  const dir = resolve(io.cwd, opts.dir);
  const giveUpMs = opts.writeGiveUpMs ?? (opts.once ? 5000 : 120_000);
  const tty = io.stdout.isTTY === true && !opts.json;
  let progress = false;
  const clearProgress = () => {
    if (progress) io.stdout.write('\r\x1b[K');
    progress = false;
  };

  /** Run a write to DIR until it succeeds; reported each time it fails; false once it failed for giveUpMs. */
  const writing = async (what: string, fn: () => Promise<void>): Promise<void> => {
    const started = Date.now();
    for (let attempt = 0; ; attempt++) {
      try {
        await fn();
        if (attempt > 0) say(`${what}: done after ${attempt + 1} attempts`);
        return;
      } catch (err) {
        const message = (err as Error).message;
        if (Date.now() - started >= giveUpMs)
          throw new OddsfilesClientError('protocol', `cannot write ${dir} (${what}): ${message}; gave up after ${Math.round((Date.now() - started) / 1000)} s`);
        const waitMs = Math.min(backoffMs(attempt, 500, 10_000), Math.max(100, giveUpMs - (Date.now() - started)));
        clearProgress();
        say(`cannot write ${dir} (${what}): ${message}; retrying in ${(waitMs / 1000).toFixed(1)} s`);
        // A stop (SIGINT, SIGTERM) ends the wait and the retries.
        await new Promise<void>((r) => {
          const done = () => {
            clearTimeout(t);
            io.signal?.removeEventListener('abort', done);
            r();
          };
          const t = setTimeout(done, waitMs);
          io.signal?.addEventListener('abort', done, { once: true });
        });
        if (io.signal?.aborted) throw new Error(`stopped while ${what}`);
      }
    }
  };

  const notice = (n: Notice) => {
    clearProgress();
    if (n.type === 'retry') say(`${n.what}: ${n.status ?? n.error}${n.status ? ` ${n.error ?? ''}` : ''}; retrying in ${(n.waitMs / 1000).toFixed(1)} s`);
    else if (n.type === 'reconnect') say(`${n.reason}; reconnecting in ${(n.waitMs / 1000).toFixed(1)} s`);
    else if (n.type === 'reconnected') say(`reconnected: following the changes again${n.position === undefined ? '' : ` from position ${n.position}`}`);
    else say(`listing again: ${n.reason}`);
  };

  /** The first folder this run made, while nothing has been written into it. */
  let made: string | undefined;
  try {
    await writing('preparing the folder', async () => {
      made ??= await ensureDir(dir);
      await removeStrayTemps(dir);
    });
  } catch (err) {
    if (io.signal?.aborted) return 0;
    say((err as Error).message);
    return 1;
  }

  const saved = await readState(dir);
  const resumable = saved !== undefined && saved.url === base.href;
  const held = resumable ? await heldVersions(dir, saved) : [];
  const client = createClient({
    url: base,
    key,
    conflateMs: opts.conflateMs,
    position: resumable ? saved.position : undefined,
    files: held,
    relistMs: opts.relistMs,
    fetch: io.fetch,
    onNotice: notice,
  });
  const abort = () => client.close();
  io.signal?.addEventListener('abort', abort, { once: true });

  // What the folder holds, and the position it is current at: the state never names more.
  const written = new Map(held.map((v) => [v.filename, v]));
  let position = resumable ? saved.position : undefined;
  let busy = false;
  // State writes are coalesced and not waited for: the next change need not wait for them.
  let dirty = false;
  let saving: Promise<void> | undefined;
  let saveFailed: Error | undefined;
  const save = async (): Promise<void> => {
    dirty = true;
    // A save under way may have read `dirty` before it was set again: wait for it and go on.
    while (dirty && !saveFailed) {
      saving ??= (async () => {
        while (dirty) {
          dirty = false;
          const state = stateOf(base.href, position, written);
          await writing('writing its state', () => writeState(dir, state));
        }
      })()
        .catch((err: Error) => void (saveFailed = err))
        .finally(() => (saving = undefined));
      await saving;
    }
  };
  // The position also moves on changes that needed no write (a version already held).
  const ticker = setInterval(() => {
    if (!busy && client.position !== position) {
      position = client.position;
      void save();
    }
  }, 1000);
  ticker.unref();

  let updates = 0;
  let removals = 0;
  const handle = async (c: Change) => {
    if (saveFailed) throw saveFailed;
    if (!safeName(c.filename)) {
      say(`ignoring a file whose name cannot be a file here: ${JSON.stringify(c.filename)}`);
      return;
    }
    made = undefined;
    if (c.type === 'update') {
      await writing(`writing ${c.filename}`, () => writeAtomic(dir, c.filename, c.file.bytes));
      written.set(c.filename, c.file);
      updates++;
    } else {
      if (!opts.keep) await writing(`removing ${c.filename}`, () => removeFile(dir, c.filename));
      written.delete(c.filename);
      removals++;
    }
    position = client.position;
    void save();
    if (opts.json) {
      const line =
        c.type === 'update'
          ? {
              event: 'update',
              filename: c.filename,
              etag: c.etag,
              previous_etag: c.previousEtag,
              generated_at: c.generatedAt,
              published_at: c.publishedAt,
              position: c.position,
              size: c.file.bytes.length,
              via: c.via,
              wire_bytes: c.wireBytes,
              lag_ms: c.lagMs,
            }
          : { event: 'remove', filename: c.filename, previous_etag: c.previousEtag, position: c.position, reason: c.reason, kept: opts.keep === true };
      io.stdout.write(`${JSON.stringify(line)}\n`);
    } else if (tty) {
      const what = c.type === 'update' ? `${c.filename} ${c.lagMs.published} ms after publication (${c.via}, ${c.wireBytes} B)` : `removed ${c.filename}`;
      io.stdout.write(`\r\x1b[K${client.files.size} files, position ${c.position}: ${what}`);
      progress = true;
    }
    if (opts.exec) await runExec(opts.exec, c, join(dir, c.filename), io, say);
  };

  try {
    for await (const c of client.changes({ follow: !opts.once })) {
      busy = true;
      await handle(c);
      busy = false;
    }
    position = client.position;
    await save();
    if (saveFailed) throw saveFailed;
    clearProgress();
    const summary = { event: 'synced', position: client.position, files: client.files.size, updated: updates, removed: removals };
    if (opts.json) io.stdout.write(`${JSON.stringify(summary)}\n`);
    else if (opts.once)
      io.stdout.write(
        `${summary.files} ${summary.files === 1 ? 'file' : 'files'} current in ${dir} at position ${summary.position} (${updates} updated, ${removals} removed)\n`,
      );
    return 0;
  } catch (err) {
    clearProgress();
    await saving;
    if (io.signal?.aborted) return 0;
    if (made !== undefined) await removeMadeDirs(dir, made);
    say(err instanceof OddsfilesClientError ? err.message : `stopped: ${(err as Error).stack ?? String(err)}`);
    return err instanceof OddsfilesClientError && err.code === 'bad-url' ? 2 : 1;
  } finally {
    clearInterval(ticker);
    io.signal?.removeEventListener('abort', abort);
    client.close();
  }
}

function runExec(command: string, c: Change, path: string, io: MirrorIO, say: (line: string) => void): Promise<void> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(io.env)) if (v !== undefined && k !== KEY_ENV) env[k] = v;
  Object.assign(env, {
    ODDSFILES_EVENT: c.type,
    ODDSFILES_FILE: c.filename,
    ODDSFILES_PATH: path,
    ODDSFILES_ETAG: c.type === 'update' ? c.etag : '',
    ODDSFILES_PREVIOUS_ETAG: c.previousEtag ?? '',
    ODDSFILES_GENERATED_AT: c.type === 'update' ? c.generatedAt : '',
    ODDSFILES_POSITION: String(c.position),
  });
  return new Promise((done) => {
    // Its output goes to stderr: stdout carries the --json lines.
    const child = spawn(command, { shell: true, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pipe(io.stderr, { end: false });
    child.stderr.pipe(io.stderr, { end: false });
    child.once('error', (err) => {
      say(`--exec could not run: ${err.message}`);
      done();
    });
    child.once('exit', (code, signal) => {
      if (code !== 0) say(`--exec exited with ${code ?? signal} for ${c.filename}`);
      done();
    });
  });
}

export { STATE_FILE };
