/**
 * Receiving the body of a PUT: all of it, within bounds, or a problem. At most `maxBytes` are
 * read from the wire and, for `Content-Encoding: gzip`, at most `maxBytes` come out of the
 * decompression: past either, 413 at once (nothing more is kept; the rest is discarded as it
 * arrives, and the caller ends the connection shortly after answering: ending it at once could
 * reset it before the client reads the answer). The whole body must arrive within `timeoutMs` (408). A client that goes away mid-body
 * settles it as `aborted`: nothing was kept, nothing is answered.
 */
import type { Readable } from 'node:stream';
import { createGunzip, type Gunzip } from 'node:zlib';
import { HttpProblem } from '../../errors.js';

export interface UploadLimits {
  readonly maxBytes: number;
  readonly timeoutMs: number;
  readonly gzip: boolean;
}

/** The client went away before the whole body arrived. */
export const ABORTED = Symbol('aborted');

/** 413. `close`: ask the client to close the connection (refused before any byte of the body was read). */
export function tooLarge(maxBytes: number, what = 'The document', close = false): HttpProblem {
  return new HttpProblem('payload_too_large', `${what} is larger than ${maxBytes} bytes (limits.max_file_bytes).`, close ? { connection: 'close' } : {});
}

export function readUpload(stream: Readable, limits: UploadLimits): Promise<Buffer | HttpProblem | typeof ABORTED> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let wire = 0;
    let out = 0;
    let ended = false;
    let settled = false;
    const gunzip: Gunzip | undefined = limits.gzip ? createGunzip() : undefined;
    const settle = (result: Buffer | HttpProblem | typeof ABORTED) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      stream.off('data', onData);
      if (result !== ABORTED && !(result instanceof Buffer)) {
        // Keep nothing more: what still arrives is read and dropped until the connection closes.
        chunks.length = 0;
        stream.on('data', () => undefined);
        stream.resume();
      }
      if (gunzip) {
        gunzip.removeAllListeners('data');
        gunzip.on('error', () => undefined);
        gunzip.destroy();
      }
      resolve(result);
    };
    const take = (c: Buffer) => {
      out += c.length;
      if (out > limits.maxBytes) return settle(tooLarge(limits.maxBytes, 'The decompressed document'));
      chunks.push(c);
    };
    const onData = (c: Buffer) => {
      wire += c.length;
      if (wire > limits.maxBytes) return settle(tooLarge(limits.maxBytes, 'The body'));
      if (gunzip) gunzip.write(c);
      else take(c);
    };
    const done = () => settle(Buffer.concat(chunks, out));
    stream.on('data', onData);
    stream.once('end', () => {
      ended = true;
      if (gunzip) gunzip.end();
      else done();
    });
    stream.once('close', () => {
      if (!ended) settle(ABORTED);
    });
    stream.once('error', () => settle(ABORTED));
    if (gunzip) {
      gunzip.on('data', take);
      gunzip.once('end', done);
      gunzip.once('error', () => settle(new HttpProblem('bad_request', 'The body is not valid gzip (Content-Encoding: gzip).')));
    }
    const timer = setTimeout(
      () =>
        settle(
          new HttpProblem('request_timeout', `The body did not arrive within ${limits.timeoutMs / 1000} s (publish.upload_timeout).`, { connection: 'close' }),
        ),
      limits.timeoutMs,
    );
  });
}
