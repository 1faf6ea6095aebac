/**
 * HTTP/1.1 requests written byte for byte on a TCP socket, for hostile-request tests: any method,
 * any request target (unnormalised, undecoded, overlong UTF-8, NUL), any header, even malformed.
 */
import { connect } from 'node:net';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';

export interface RawResponse {
  /** 0 when the server closed the connection without answering. */
  readonly status: number;
  readonly headers: Record<string, string>;
  /** The body, chunked transfer and content-coding undone. */
  readonly body: Buffer;
  readonly raw: Buffer;
}

export function rawRequest(port: number, request: Buffer | string, timeoutMs = 5000): Promise<RawResponse> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = connect(port, '127.0.0.1');
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parseResponse(Buffer.concat(chunks)));
    };
    const timer = setTimeout(finish, timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', finish);
    socket.on('close', finish);
    socket.on('error', finish);
    socket.write(request);
  });
}

function parseResponse(raw: Buffer): RawResponse {
  const split = raw.indexOf('\r\n\r\n');
  if (split < 0) {
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(raw.toString('latin1'));
    return { status: m ? Number(m[1]) : 0, headers: {}, body: Buffer.alloc(0), raw };
  }
  const head = raw.subarray(0, split).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? '');
  const headers: Record<string, string> = {};
  for (const line of head.slice(1)) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  let body = raw.subarray(split + 4);
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) body = unchunk(body);
  else if (headers['content-length'] !== undefined) body = body.subarray(0, Number(headers['content-length']));
  try {
    if (headers['content-encoding'] === 'gzip') body = gunzipSync(body);
    else if (headers['content-encoding'] === 'br') body = brotliDecompressSync(body);
  } catch {
    /* left as is: the caller sees bytes that match nothing */
  }
  return { status: m ? Number(m[1]) : 0, headers, body, raw };
}

function unchunk(data: Buffer): Buffer {
  const out: Buffer[] = [];
  let i = 0;
  while (i < data.length) {
    const eol = data.indexOf('\r\n', i);
    if (eol < 0) break;
    const size = parseInt(data.subarray(i, eol).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0) break;
    out.push(data.subarray(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}
