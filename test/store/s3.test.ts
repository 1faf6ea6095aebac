import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.js';
import { StoreNotFoundError, StoreUnavailableError } from '../../src/errors.js';
import { createS3Store } from '../../src/store/s3-store.js';
import type { Store } from '../../src/store/store.js';
import { startS3rver, type RunningS3rver } from '../helpers/s3/s3rver.js';
import { storeContract, type OpenedStore } from './contract.js';

// createS3Store takes credentials from the SDK's default chain: the environment here.
const CREDENTIAL_ENV = ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE'] as const;
const savedEnv = Object.fromEntries(CREDENTIAL_ENV.map((k) => [k, process.env[k]]));

let s3rver: RunningS3rver;
let admin: S3Client;
let s3: Config['s3'];

beforeAll(async () => {
  s3rver = await startS3rver();
  for (const k of CREDENTIAL_ENV) delete process.env[k];
  process.env.AWS_ACCESS_KEY_ID = s3rver.env.AWS_ACCESS_KEY_ID;
  process.env.AWS_SECRET_ACCESS_KEY = s3rver.env.AWS_SECRET_ACCESS_KEY;
  s3 = { endpoint: s3rver.endpoint, forcePathStyle: true, region: undefined };
  admin = new S3Client({
    region: 'us-east-1',
    endpoint: s3rver.endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
});

afterAll(async () => {
  admin?.destroy();
  await s3rver?.stop();
  for (const k of CREDENTIAL_ENV) {
    if (savedEnv[k] === undefined) delete process.env[k];
    else process.env[k] = savedEnv[k];
  }
});

const unique = () => randomBytes(6).toString('hex');

function opened(store: Store): OpenedStore {
  return { store, cleanup: () => store.close() };
}

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

const openUnavailable = async (): Promise<OpenedStore> =>
  opened(createS3Store(`s3://${s3rver.bucket}/p`, { endpoint: `http://127.0.0.1:${await closedPort()}`, forcePathStyle: true, region: 'us-east-1' }));

storeContract('s3 over s3rver, with a prefix', async () => opened(createS3Store(`s3://${s3rver.bucket}/t-${unique()}/nested`, s3)), { openUnavailable });

storeContract(
  's3 over s3rver, without a prefix',
  async () => {
    const bucket = `b-${unique()}`;
    await admin.send(new CreateBucketCommand({ Bucket: bucket }));
    return opened(createS3Store(`s3://${bucket}`, s3));
  },
  { openUnavailable },
);

describe('s3 store specifics', () => {
  it('stores each key at <prefix>/<key>, however the prefix is written', async () => {
    const prefix = `t-${unique()}`;
    const a = createS3Store(`s3://${s3rver.bucket}/${prefix}/x/`, s3);
    const b = createS3Store(`s3://${s3rver.bucket}//${prefix}//x`, s3);
    const other = createS3Store(`s3://${s3rver.bucket}/${prefix}/x2`, s3);
    try {
      await a.put('objects/f/1.json', Buffer.from('1'));
      await other.put('manifest.json', Buffer.from('other'));
      expect((await b.get('objects/f/1.json')).toString()).toBe('1');
      expect(await a.list('')).toEqual(['objects/f/1.json']);
      const raw = await admin.send(new ListObjectsV2Command({ Bucket: s3rver.bucket, Prefix: `${prefix}/` }));
      expect(raw.Contents?.map((o) => o.Key).sort()).toEqual([`${prefix}/x/objects/f/1.json`, `${prefix}/x2/manifest.json`]);
      const obj = await admin.send(new GetObjectCommand({ Bucket: s3rver.bucket, Key: `${prefix}/x/objects/f/1.json` }));
      expect(obj.ContentType).toBe('application/json');
      await obj.Body?.transformToByteArray();
    } finally {
      await Promise.all([a.close(), b.close(), other.close()]);
    }
  });

  it('lists past one page (ListObjectsV2 pagination)', { timeout: 60_000 }, async () => {
    const store = createS3Store(`s3://${s3rver.bucket}/t-${unique()}`, s3);
    try {
      const keys = Array.from({ length: 1_005 }, (_, i) => `objects/f/${String(i).padStart(4, '0')}.json`);
      for (let i = 0; i < keys.length; i += 100) {
        await Promise.all(keys.slice(i, i + 100).map((k) => store.put(k, Buffer.alloc(0))));
      }
      await store.put('manifest.json', Buffer.from('{}'));
      expect(await store.list('objects/')).toEqual(keys);
      expect(await store.list('')).toEqual(['manifest.json', ...keys]);
    } finally {
      await store.close();
    }
  });

  it('reads objects written by other tools (no checksum metadata)', async () => {
    const prefix = `t-${unique()}`;
    const store = createS3Store(`s3://${s3rver.bucket}/${prefix}`, s3);
    try {
      const body = randomBytes(10_000);
      await admin.send(new PutObjectCommand({ Bucket: s3rver.bucket, Key: `${prefix}/manifest.json`, Body: body }));
      expect((await store.get('manifest.json')).equals(body)).toBe(true);
    } finally {
      await store.close();
    }
  });

  describe('checksums: WHEN_REQUIRED', () => {
    let proxy: Server;
    const seen: { method: string; url: string; headers: IncomingHttpHeaders }[] = [];

    beforeAll(async () => {
      // A recording pass-through in front of the real s3rver.
      const target = new URL(s3rver.endpoint);
      proxy = createServer((req, res) => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
        const upstream = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        });
        upstream.on('error', () => res.destroy());
        req.pipe(upstream);
      });
      proxy.listen(0, '127.0.0.1');
      await once(proxy, 'listening');
    });
    afterAll(async () => {
      proxy.closeAllConnections();
      proxy.close();
    });

    it('sends no flexible-checksum headers and a signed, unchunked body', async () => {
      const { port } = proxy.address() as AddressInfo;
      const store = createS3Store(`s3://${s3rver.bucket}/t-${unique()}`, { ...s3, endpoint: `http://127.0.0.1:${port}` });
      try {
        const body = randomBytes(100_000);
        await store.put('manifest.json', body);
        expect((await store.get('manifest.json')).equals(body)).toBe(true);
      } finally {
        await store.close();
      }
      const put = seen.find((r) => r.method === 'PUT');
      const get = seen.find((r) => r.method === 'GET');
      expect(put).toBeDefined();
      expect(get).toBeDefined();
      for (const r of [put!, get!]) {
        const names = Object.keys(r.headers);
        expect(names.filter((h) => h.startsWith('x-amz-checksum') || h === 'x-amz-sdk-checksum-algorithm' || h === 'x-amz-trailer')).toEqual([]);
        // path style: the bucket is in the path, not the host
        expect(r.url.startsWith(`/${s3rver.bucket}/`)).toBe(true);
      }
      expect(put!.headers['content-encoding'] ?? '').not.toMatch(/aws-chunked/);
      expect(put!.headers['x-amz-content-sha256']).toMatch(/^[0-9a-f]{64}$/);
      expect(put!.headers['content-length']).toBe('100000');
      expect(put!.headers['x-amz-meta-sha256']).toMatch(/^[0-9a-f]{64}$/);
    });
  });

  describe('error mapping', () => {
    it('a missing key is StoreNotFoundError; HEAD of one is false', async () => {
      const store = createS3Store(`s3://${s3rver.bucket}/t-${unique()}`, s3);
      try {
        await expect(store.get('nope.json')).rejects.toBeInstanceOf(StoreNotFoundError);
        expect(await store.exists('nope.json')).toBe(false);
        await store.delete('nope.json');
      } finally {
        await store.close();
      }
    });

    it('NoSuchBucket is StoreUnavailableError', async () => {
      const store = createS3Store(`s3://no-such-bucket-${unique()}/p`, s3);
      try {
        for (const call of [() => store.get('manifest.json'), () => store.put('manifest.json', Buffer.from('{}')), () => store.list(''), () => store.ping()]) {
          const err = await call().then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(err).toBeInstanceOf(StoreUnavailableError);
          expect(err).not.toBeInstanceOf(StoreNotFoundError);
        }
        const err = (await store.get('manifest.json').catch((e: unknown) => e)) as StoreUnavailableError;
        expect(err.message).toMatch(/NoSuchBucket/);
        expect((err.cause as Error).name).toBe('NoSuchBucket');
      } finally {
        await store.close();
      }
    });

    it('rejected credentials are StoreUnavailableError and the key id is not passed on', async () => {
      const keyId = `AKIA${unique().toUpperCase()}`;
      process.env.AWS_ACCESS_KEY_ID = keyId;
      const store = createS3Store(`s3://${s3rver.bucket}/p`, s3);
      try {
        const err = (await store.get('manifest.json').catch((e: unknown) => e)) as StoreUnavailableError;
        expect(err).toBeInstanceOf(StoreUnavailableError);
        expect((err.cause as Error).name).toBe('InvalidAccessKeyId');
        expect(err.message).not.toContain(keyId);
        expect(JSON.stringify({ ...(err.cause as object) })).not.toContain(keyId);
      } finally {
        process.env.AWS_ACCESS_KEY_ID = s3rver.env.AWS_ACCESS_KEY_ID;
        await store.close();
      }
    });

    it('a stopped server is StoreUnavailableError', { timeout: 20_000 }, async () => {
      const server = await startS3rver({ bucket: 'stopped' });
      const store = createS3Store('s3://stopped/p', { ...s3, endpoint: server.endpoint });
      try {
        await store.put('manifest.json', Buffer.from('{}'));
        await store.ping();
        await server.stop();
        for (const call of [() => store.get('manifest.json'), () => store.exists('manifest.json'), () => store.ping()]) {
          await expect(call()).rejects.toBeInstanceOf(StoreUnavailableError);
        }
      } finally {
        await store.close();
        await server.stop();
      }
    });
  });

  it('never returns a torn body, even from a server that overwrites in place', { timeout: 60_000 }, async () => {
    // Stock s3rver rewrites the object file in place (see test/helpers/s3/s3rver.ts): get() must
    // catch a short or mixed body by its length and checksum and read again, or give up with
    // StoreUnavailableError, but never return it.
    const stock = await startS3rver({ atomic: false });
    const store = createS3Store(`s3://${stock.bucket}/p`, { ...s3, endpoint: stock.endpoint });
    try {
      const versions = [30_000, 200_000, 500, 90_000].map((n, i) => Buffer.concat([Buffer.from(`v${i}`), randomBytes(n)]));
      await store.put('manifest.json', versions[0]!);
      let writing = true;
      let good = 0;
      let unavailable = 0;
      const torn: number[] = [];
      const writer = (async () => {
        for (let i = 1; i <= 24; i++) await store.put('manifest.json', versions[i % versions.length]!);
        writing = false;
      })();
      const reader = async () => {
        while (writing) {
          try {
            const body = await store.get('manifest.json');
            if (versions.some((v) => v.equals(body))) good++;
            else torn.push(body.length);
          } catch (err) {
            if (!(err instanceof StoreUnavailableError)) throw err;
            unavailable++;
          }
        }
      };
      await Promise.all([writer, reader(), reader(), reader()]);
      expect(torn).toEqual([]);
      expect(good + unavailable).toBeGreaterThan(0);
    } finally {
      await store.close();
      await stock.stop();
    }
  });
});
