/**
 * Reads an s3rver bucket directly with the AWS SDK (not through the project's Store), for
 * assertions on what the service left in it: keys under a prefix, an object's bytes.
 */
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import type { RunningS3rver } from './s3rver.js';

export interface BucketReader {
  /** Every key under `prefix` (whole bucket keys, not relative to the store prefix), sorted. */
  list(prefix: string): Promise<string[]>;
  get(key: string): Promise<Buffer>;
  close(): void;
}

export function bucketReader(server: Pick<RunningS3rver, 'endpoint' | 'bucket' | 'env'>): BucketReader {
  const client = new S3Client({
    region: 'us-east-1',
    endpoint: server.endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: server.env.AWS_ACCESS_KEY_ID!, secretAccessKey: server.env.AWS_SECRET_ACCESS_KEY! },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  const Bucket = server.bucket;
  return {
    async list(prefix) {
      const keys: string[] = [];
      let ContinuationToken: string | undefined;
      do {
        const res = await client.send(new ListObjectsV2Command({ Bucket, Prefix: prefix, ContinuationToken }));
        for (const o of res.Contents ?? []) if (o.Key) keys.push(o.Key);
        ContinuationToken = res.IsTruncated ? res.NextContinuationToken : undefined;
      } while (ContinuationToken);
      return keys.sort();
    },
    async get(key) {
      const res = await client.send(new GetObjectCommand({ Bucket, Key: key }));
      const bytes = await res.Body!.transformToByteArray();
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    },
    close() {
      client.destroy();
    },
  };
}

/** The store prefix of an `s3://bucket/prefix` URL, with a trailing slash ('' for none). */
export function storePrefixOf(storeUrl: string): string {
  const m = /^s3:\/\/[^/]+\/?(.*)$/.exec(storeUrl);
  if (!m) throw new TypeError(`not an s3:// URL: ${storeUrl}`);
  const prefix = m[1]!.split('/').filter(Boolean).join('/');
  return prefix === '' ? '' : `${prefix}/`;
}
