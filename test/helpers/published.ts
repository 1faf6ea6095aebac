/** Reads what is published straight from Redis and the filesystem store, for assertions. */
import { createHash } from 'node:crypto';
import { readFile, readdir } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { Redis } from 'ioredis';
import type { CatalogEntry } from '../../src/catalog/types.js';
import { TEST_REDIS_URL } from './redis.js';

export async function readCatalog(prefix: string): Promise<Map<string, CatalogEntry>> {
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  try {
    const all = await redis.hgetall(`${prefix}:catalog`);
    return new Map(Object.entries(all).map(([k, v]) => [k, JSON.parse(v) as CatalogEntry]));
  } finally {
    redis.disconnect();
  }
}

/** The catalog's seq: how many commits it has taken (0 before the first). */
export async function catalogSeq(prefix: string): Promise<number> {
  const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  try {
    return Number((await redis.get(`${prefix}:catalog:seq`)) ?? 0);
  } finally {
    redis.disconnect();
  }
}

export function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Every object file in a filesystem store (temp folder excluded), relative to its root. */
export async function storeFiles(storeDir: string): Promise<string[]> {
  const entries = await readdir(storeDir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(storeDir, join(e.parentPath, e.name)))
    .filter((p) => !p.startsWith('.tmp'));
}

/** Every version object must hash to the name it is stored under: no partial object, ever. */
export async function assertObjectsWhole(storeDir: string): Promise<number> {
  let n = 0;
  for (const p of await storeFiles(storeDir)) {
    const m = /^objects\/([^/]+)\/([0-9a-f]{64})\.json$/.exec(p);
    if (!m) continue;
    const bytes = await readFile(join(storeDir, p));
    if (sha256(bytes) !== m[2]) throw new Error(`torn or partial object in the store: ${p}`);
    n++;
  }
  return n;
}
