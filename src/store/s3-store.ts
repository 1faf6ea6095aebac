import { setTimeout as sleep } from 'node:timers/promises';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import type { Config } from '../config.js';
import { OddsfilesError, StoreNotFoundError, StoreUnavailableError } from '../errors.js';
import { assertValidKey, type Store } from './store.js';
import { sha256Hex } from '../sha256.js';

/** User metadata holding the SHA-256 of the body, checked on every get(). */
const SHA256_META = 'sha256';
/** How often get() reads an object whose body is cut short or does not match its checksum. */
const GET_ATTEMPTS = 4;

/**
 * The S3 backend, for AWS S3 and S3-compatible servers (MinIO, s3rver): `s3://bucket/prefix`,
 * each key stored at `<prefix>/<key>`. Credentials come from the SDK's default chain.
 *
 * A PUT of a whole Buffer is atomic on S3 already, so no conditional writes are needed. put()
 * also records the body's SHA-256 in user metadata and get() checks it: a body that does not
 * match (a server that overwrites in place, like s3rver, or a truncated transfer) is read again
 * and never returned.
 */
export function createS3Store(url: string, s3: Config['s3']): Store {
  const { bucket, prefix } = parseS3Url(url);
  const base = prefix === '' ? '' : `${prefix}/`;
  const client = new S3Client({
    region: s3.region ?? 'us-east-1',
    ...(s3.endpoint ? { endpoint: s3.endpoint } : {}),
    forcePathStyle: s3.forcePathStyle,
    // S3-compatible servers reject or mishandle the SDK's default flexible checksums
    // (aws-chunked trailers, x-amz-checksum-* headers): send and check them only when required.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: 3,
    requestHandler: {
      connectionTimeout: 5_000,
      requestTimeout: 30_000,
      throwOnRequestTimeout: true,
      socketTimeout: 30_000,
    },
  });
  const fullKey = (key: string) => {
    assertValidKey(key);
    return `${base}${key}`;
  };

  return {
    description: url,
    async put(key, bytes, contentType) {
      const Key = fullKey(key);
      try {
        await client.send(
          new PutObjectCommand({
            Bucket: bucket,
            Key,
            Body: bytes,
            ContentLength: bytes.length,
            ContentType: contentType ?? (key.endsWith('.json') ? 'application/json' : 'application/octet-stream'),
            Metadata: { [SHA256_META]: sha256Hex(bytes) },
          }),
        );
      } catch (err) {
        throw toStoreError(err, `put ${key}`, key);
      }
    },
    async get(key) {
      const Key = fullKey(key);
      for (let attempt = 1; ; attempt++) {
        let res;
        try {
          res = await client.send(new GetObjectCommand({ Bucket: bucket, Key }));
        } catch (err) {
          throw toStoreError(err, `get ${key}`, key);
        }
        // The SDK retries until the headers arrive; a body cut short or not matching its
        // checksum is read again here.
        let body: Buffer | undefined;
        let failure: unknown;
        try {
          if (!res.Body) throw new Error('response without a body');
          const array = await res.Body.transformToByteArray();
          body = Buffer.from(array.buffer, array.byteOffset, array.byteLength);
        } catch (err) {
          failure = err;
        }
        if (body !== undefined) {
          const expected = res.Metadata?.[SHA256_META];
          const lengthOk = res.ContentLength === undefined || res.ContentLength === body.length;
          if (lengthOk && (expected === undefined || expected === sha256Hex(body))) return body;
          failure = new Error('body does not match its length or checksum');
        }
        if (attempt >= GET_ATTEMPTS) throw toStoreError(failure, `get ${key}`);
        await sleep(20 * attempt);
      }
    },
    async exists(key) {
      const Key = fullKey(key);
      try {
        await client.send(new HeadObjectCommand({ Bucket: bucket, Key }));
        return true;
      } catch (err) {
        const mapped = toStoreError(err, `exists ${key}`, key);
        if (mapped instanceof StoreNotFoundError) return false;
        throw mapped;
      }
    },
    async delete(key) {
      const Key = fullKey(key);
      try {
        await client.send(new DeleteObjectCommand({ Bucket: bucket, Key }));
      } catch (err) {
        const mapped = toStoreError(err, `delete ${key}`, key);
        if (!(mapped instanceof StoreNotFoundError)) throw mapped;
      }
    },
    async list(listPrefix) {
      const keys: string[] = [];
      try {
        let ContinuationToken: string | undefined;
        do {
          const res = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${base}${listPrefix}`, ContinuationToken }));
          for (const o of res.Contents ?? []) {
            if (o.Key?.startsWith(base) && o.Key.length > base.length) keys.push(o.Key.slice(base.length));
          }
          ContinuationToken = res.IsTruncated ? res.NextContinuationToken : undefined;
        } while (ContinuationToken);
      } catch (err) {
        throw toStoreError(err, `list ${listPrefix}`);
      }
      return keys.sort();
    },
    async ping() {
      try {
        await client.send(new HeadBucketCommand({ Bucket: bucket }));
      } catch (err) {
        throw toStoreError(err, 'ping');
      }
    },
    async close() {
      client.destroy();
    },
  };
}

/** `s3://bucket/some/prefix/` → bucket and prefix without leading, trailing or double slashes. */
function parseS3Url(url: string): { bucket: string; prefix: string } {
  const m = /^s3:\/\/([^/]+)(?:\/(.*))?$/.exec(url);
  if (!m) throw new TypeError(`not an s3://bucket/prefix URL: ${JSON.stringify(url)}`);
  const prefix = (m[2] ?? '')
    .split('/')
    .filter((s) => s !== '')
    .join('/');
  return { bucket: m[1]!, prefix };
}

/**
 * The one mapping of S3 failures: a missing object (NoSuchKey, or a 404 on an object HEAD) is
 * StoreNotFoundError when `key` names an object; everything else, a missing bucket included, is
 * StoreUnavailableError. An S3 error reply is passed on as a copy holding its name, message,
 * code, status and stack only: the SDK's error also carries the raw response (and with it the
 * signed request's headers) and, for signature errors, the access key id and string to sign.
 */
function toStoreError(err: unknown, what: string, key?: string): Error {
  if (err instanceof OddsfilesError) return err;
  const e = (err ?? {}) as Partial<Error> & {
    Code?: string;
    code?: string;
    $fault?: string;
    $metadata?: { httpStatusCode?: number; requestId?: string; attempts?: number };
  };
  const name = e.name ?? 'Error';
  const status = e.$metadata?.httpStatusCode;
  const missingObject = name === 'NoSuchKey' || (name === 'NotFound' && status === 404);
  if (key !== undefined && missingObject) return new StoreNotFoundError(key);
  const code = e.code ?? e.Code;
  let cause = err;
  if (e.$metadata) {
    const copy = Object.assign(new Error(e.message ?? ''), {
      name,
      ...(code ? { code } : {}),
      $fault: e.$fault,
      $metadata: { httpStatusCode: status, requestId: e.$metadata.requestId, attempts: e.$metadata.attempts },
    });
    copy.stack = e.stack;
    cause = copy;
  }
  const detail = `${name}${code && code !== name ? ` (${code})` : ''}${status ? ` HTTP ${status}` : ''}` + `${e.message ? `: ${e.message}` : ''}`;
  return new StoreUnavailableError(`store ${what}: ${detail}`, { cause });
}
