// Runs one s3rver for test/helpers/s3/s3rver.ts, in its own process so that it can have
// --openssl-legacy-provider: s3rver 3.7.1 encrypts ListObjectsV2 continuation tokens with DES,
// which OpenSSL 3 (Node >= 17) refuses without it, so every truncated listing would fail with
// InternalError. Argument: JSON { directory, bucket, atomic }. Reports { port } over IPC.
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { buffer } from 'node:stream/consumers';
import S3rver from 's3rver';

const { directory, bucket, atomic } = JSON.parse(process.argv[2] ?? '{}');
const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });
if (atomic) patchAtomicWrites(server);
const { port } = await server.run();
// Stock s3rver can send a body shorter than its Content-Length (see below): the client then
// waits for the rest until the server drops the idle connection. Keep that wait short.
if (!atomic) server.httpServer.keepAliveTimeout = 500;
process.on('disconnect', () => process.exit(0));
process.send({ port });

/**
 * Gives this server S3's overwrite semantics. Stock s3rver 3.7.1 truncates and rewrites an
 * object file in place, answers a PUT before the bytes are flushed, and a GET stats the file
 * before opening it: a GET during (or right after) an overwrite can return a truncated or
 * mixed body, or a short body under a longer Content-Length.
 * Patched (this store instance only): a PUT reads the whole body, writes a temp file and renames
 * it over the object before answering; PUT, GET and DELETE of one key are serialised until the
 * object file is open. A GET then streams from an open descriptor: one whole version, with that
 * version's metadata.
 */
function patchAtomicWrites(s3rver) {
  const store = s3rver.store;
  const methods = ['getResourcePath', 'putMetadata', 'putObject', 'getObject', 'deleteObject'];
  if (!store || methods.some((m) => typeof store[m] !== 'function')) {
    throw new Error('s3rver internals changed: cannot make its writes atomic (test/helpers/s3/s3rver-process.mjs)');
  }
  const locks = new Map();
  const serial = (bucketName, key, fn) => {
    const id = `${bucketName}/${key}`;
    const run = (locks.get(id) ?? Promise.resolve()).catch(() => undefined).then(fn);
    locks.set(id, run);
    void run
      .catch(() => undefined)
      .then(() => {
        if (locks.get(id) === run) locks.delete(id);
      });
    return run;
  };
  const getObject = store.getObject.bind(store);
  const deleteObject = store.deleteObject.bind(store);
  store.getObject = (b, key, options) => serial(b, key, () => getObject(b, key, options));
  store.deleteObject = (b, key) => serial(b, key, () => deleteObject(b, key));
  store.putObject = async (object) => {
    const content = Buffer.isBuffer(object.content) ? object.content : await buffer(object.content);
    const md5 = createHash('md5').update(content).digest('hex');
    return serial(object.bucket, object.key, async () => {
      const path = store.getResourcePath(object.bucket, object.key, 'object');
      const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
      await mkdir(dirname(path), { recursive: true });
      try {
        await writeFile(tmp, content);
        await rename(tmp, path);
      } finally {
        await rm(tmp, { force: true });
      }
      await store.putMetadata(object.bucket, object.key, object.metadata, md5);
      return { size: content.length, md5 };
    });
  };
}
