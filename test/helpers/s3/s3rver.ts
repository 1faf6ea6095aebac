import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { forkTracked } from '../processes.js';

const SERVER_SCRIPT = fileURLToPath(new URL('./s3rver-process.mjs', import.meta.url));

export interface RunningS3rver {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  bucket: string;
  /** What a child process needs to use the server as its store (store prefix `oddsfiles`). */
  env: Record<string, string>;
  /** Stops the server (its process) and removes its directory. Idempotent. */
  stop(): Promise<void>;
}

export interface S3rverOptions {
  bucket?: string;
  /**
   * Give overwrites S3's atomicity (default true). Stock s3rver 3.7.1 rewrites an object file in
   * place, so a GET racing a PUT of the same key can return a truncated or mixed body; `false`
   * keeps that behaviour, to test how a client copes. See s3rver-process.mjs.
   */
  atomic?: boolean;
}

/**
 * A real s3rver on 127.0.0.1 (a free port) over a temp directory, with one empty bucket. It runs
 * in a child process started with --openssl-legacy-provider (its ListObjectsV2 continuation
 * tokens use DES); the SDK's test credentials are S3RVER / S3RVER.
 */
export async function startS3rver(options: S3rverOptions = {}): Promise<RunningS3rver> {
  const bucket = options.bucket ?? 'oddsfiles-test';
  const directory = await mkdtemp(join(tmpdir(), 's3rver-'));
  const child = forkTracked(SERVER_SCRIPT, [JSON.stringify({ directory, bucket, atomic: options.atomic ?? true })], {
    execArgv: ['--openssl-legacy-provider'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = once(child, 'exit');
  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) => {
      child.once('message', (m: { port: number }) => resolve(m.port));
      child.once('error', reject);
      child.once('exit', (code, signal) => reject(new Error(`s3rver exited during start-up (${code ?? signal})`)));
    });
  } catch (err) {
    child.kill('SIGKILL');
    await rm(directory, { recursive: true, force: true });
    throw err;
  }
  // Neither the process nor its IPC channel keeps this one alive; the server exits when the
  // channel closes (this process ends), so a forgotten stop() leaves no server behind.
  child.unref();
  child.channel?.unref();
  const endpoint = `http://127.0.0.1:${port}`;
  let stopped: Promise<void> | undefined;
  return {
    endpoint,
    bucket,
    env: {
      STORE_URL: `s3://${bucket}/oddsfiles`,
      S3_ENDPOINT: endpoint,
      S3_FORCE_PATH_STYLE: 'true',
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
    },
    stop() {
      stopped ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
        await exited;
        await rm(directory, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}
