/**
 * when REDIS_URL is unset and nothing answers at the default, `oddsfiles start`
 * runs a private redis-server with its data under DATA_DIR/redis (append-only) and stops it on
 * exit. Its address is written to DATA_DIR/redis/redis.url so other commands (status, keys)
 * find it while it runs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { delimiter, join } from 'node:path';
import type { Config } from '../config.js';
import { RedisUnavailableError } from '../errors.js';
import { redisAnswers } from './connect.js';

export interface ResolvedRedis {
  readonly url: string;
  /** Set when this process started a private redis-server. */
  readonly privateServer: { stop(): Promise<void> } | undefined;
}

const HOW_TO_GET_REDIS =
  'Install Redis 6.2+ (Debian/Ubuntu: apt-get install -y redis-server; macOS: brew install redis) ' +
  'and start it, or set REDIS_URL=redis://host:port to an existing one.';

export async function resolveRedis(
  config: { readonly redis: Pick<Config['redis'], 'url' | 'explicit' | 'prefix'>; readonly dataDir: string },
  options: { startPrivate: boolean; log?: (msg: string) => void },
): Promise<ResolvedRedis> {
  const { url, explicit } = config.redis;
  if (explicit || (await redisAnswers(url))) return { url, privateServer: undefined };

  const dir = join(config.dataDir, 'redis');
  const urlFile = join(dir, 'redis.url');
  const recorded = await readFile(urlFile, 'utf8').then(
    (s) => s.trim(),
    () => undefined,
  );
  if (recorded && (await redisAnswers(recorded))) return { url: recorded, privateServer: undefined };

  if (!options.startPrivate) {
    throw new RedisUnavailableError(
      `Redis does not answer at ${url}, and no private redis-server of \`oddsfiles start\` runs for DATA_DIR ${config.dataDir}: is the service running, with this DATA_DIR? ${HOW_TO_GET_REDIS}`,
    );
  }
  const binary = findOnPath('redis-server');
  if (!binary) {
    throw new RedisUnavailableError(`Redis does not answer at ${url} and no redis-server is on the PATH to start a private one. ${HOW_TO_GET_REDIS}`);
  }
  await mkdir(dir, { recursive: true });
  const port = await freePort();
  const child = spawn(
    binary,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--appendonly',
      'yes',
      '--save',
      '',
      '--maxmemory-policy',
      'noeviction',
      '--protected-mode',
      'yes',
    ],
    { stdio: 'ignore' },
  );
  const privateUrl = `redis://127.0.0.1:${port}`;
  await waitForRedis(privateUrl, child);
  await writeFile(urlFile, `${privateUrl}\n`);
  options.log?.(`started a private redis-server at ${privateUrl} (data in ${dir})`);
  return {
    url: privateUrl,
    privateServer: {
      async stop() {
        await rm(urlFile, { force: true });
        if (child.exitCode !== null) return;
        const exited = new Promise<void>((res) => child.once('exit', () => res()));
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        if (child.exitCode === null) child.kill('SIGKILL');
      },
    },
  };
}

function findOnPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

async function waitForRedis(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new RedisUnavailableError(`the private redis-server exited with code ${child.exitCode}`);
    if (await redisAnswers(url, 300)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new RedisUnavailableError('the private redis-server did not answer within 10 s');
}
