/**
 * A Sentinel group on loopback ports for fault tests: a primary, a replica and three sentinels
 * (`redis-server <conf> --sentinel`), each with its files in a temp dir. Every process goes
 * through spawnTracked, so it ends with its test also when the test fails; stop() ends them too.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { spawnTracked } from './processes.js';
import { freePort, sleep } from './faults.js';

export const MASTER_NAME = 'odds';

export interface SentinelGroup {
  /** redis+sentinel://… naming the three sentinels and the group. */
  readonly url: string;
  /** The data servers' ports: [the first primary, the first replica]. */
  readonly ports: readonly [number, number];
  /** The port of the primary the sentinels name now. */
  primaryPort(): Promise<number>;
  /** SIGKILL the data server on `port`. */
  kill(port: number): void;
  /**
   * Stall the replica on `replicaPort`: stopped (SIGSTOP), with 64 MB written to the primary first so
   * that the sockets between them are full and what the primary commits next stays in its own
   * memory (lost if it dies). `resume` lets it go on.
   */
  stallReplica(primaryPort: number, replicaPort: number): Promise<void>;
  resume(port: number): void;
  /** Start the data server on `port` again, as a replica of the one on `primaryPort`. */
  restartAsReplica(port: number, primaryPort: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startSentinelGroup(dir: string): Promise<SentinelGroup> {
  const children: ChildProcess[] = [];
  const primary = await freePort();
  const replica = await freePort();
  const sentinels = [await freePort(), await freePort(), await freePort()];
  const byPort = new Map<number, ChildProcess>();
  const server = async (port: number, extra: string[]) => {
    const d = join(dir, `redis-${port}`);
    await mkdir(d, { recursive: true });
    const c = spawnTracked('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', d, '--save', '', '--appendonly', 'no', ...extra], {
      stdio: 'ignore',
    });
    children.push(c);
    byPort.set(port, c);
    await answers(port);
  };
  await server(primary, []);
  await server(replica, ['--replicaof', '127.0.0.1', String(primary)]);
  for (const port of sentinels) {
    const d = join(dir, `sentinel-${port}`);
    await mkdir(d, { recursive: true });
    const conf = join(d, 'sentinel.conf');
    await writeFile(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${d}`,
        `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${primary} 2`,
        `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
        `sentinel failover-timeout ${MASTER_NAME} 10000`,
        `sentinel parallel-syncs ${MASTER_NAME} 1`,
        '',
      ].join('\n'),
    );
    const c = spawnTracked('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
    children.push(c);
    await answers(port);
  }
  // The replica is in sync and every sentinel knows it before anything is asked of the group.
  const probe = new Redis({ port: primary, host: '127.0.0.1', lazyConnect: true });
  probe.on('error', () => undefined);
  await probe.connect();
  try {
    for (let i = 0; i < 200; i++) {
      const info = await probe.info('replication');
      if (/slave0:.*state=online/.test(info)) break;
      await sleep(50);
    }
  } finally {
    probe.disconnect();
  }
  for (const port of sentinels) {
    await until(async () => {
      const s = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
      s.on('error', () => undefined);
      try {
        await s.connect();
        const replicas = (await s.call('SENTINEL', 'REPLICAS', MASTER_NAME)) as unknown[];
        const others = (await s.call('SENTINEL', 'SENTINELS', MASTER_NAME)) as unknown[];
        return replicas.length >= 1 && others.length >= 2;
      } finally {
        s.disconnect();
      }
    }, 20_000);
  }
  return {
    url: `redis+sentinel://${sentinels.map((p) => `127.0.0.1:${p}`).join(',')}/${MASTER_NAME}`,
    ports: [primary, replica],
    async primaryPort() {
      const s = new Redis({ port: sentinels[0]!, host: '127.0.0.1', lazyConnect: true });
      s.on('error', () => undefined);
      try {
        await s.connect();
        const [, port] = (await s.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)) as [string, string];
        return Number(port);
      } finally {
        s.disconnect();
      }
    },
    kill(port) {
      byPort.get(port)?.kill('SIGKILL');
    },
    async stallReplica(primaryPort, replicaPort) {
      byPort.get(replicaPort)?.kill('SIGSTOP');
      const r = new Redis({ port: primaryPort, host: '127.0.0.1' });
      r.on('error', () => undefined);
      try {
        await r.set('sentinel-test:ballast', Buffer.alloc(64 * 1024 * 1024, 1));
      } finally {
        r.disconnect();
      }
    },
    resume(port) {
      byPort.get(port)?.kill('SIGCONT');
    },
    async restartAsReplica(port, primaryPort) {
      await server(port, ['--replicaof', '127.0.0.1', String(primaryPort)]);
    },
    async stop() {
      await Promise.all(
        children.map(async (c) => {
          if (c.exitCode !== null || c.signalCode !== null) return;
          const exited = new Promise<void>((r) => c.once('exit', () => r()));
          c.kill('SIGCONT');
          c.kill('SIGKILL');
          await exited;
        }),
      );
    },
  };
}

async function answers(port: number): Promise<void> {
  await until(async () => {
    const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    r.on('error', () => undefined);
    try {
      await r.connect();
      return (await r.ping()) === 'PONG';
    } finally {
      r.disconnect();
    }
  }, 10_000);
}

async function until(fn: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await fn().catch(() => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error('timed out waiting for the Sentinel group');
    await sleep(100);
  }
}
