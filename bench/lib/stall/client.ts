/**
 * The stall bench's own HTTP and inbox side. Its GETs go over keep-alive and only count the body's
 * bytes, without decoding: fetch's gunzip would cost this process CPU that the reader, on the same
 * cores, needs. A version is published by a rename into the inbox, and is served once the reader
 * answers its ETag with 304.
 */
import { rename } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { sha256 } from '../../../test/helpers/published.js';
import { stage } from '../common/drops.js';

export interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  /** Body bytes as sent (still compressed when the answer is). */
  readonly length: number;
}

export type Get = (url: string, headers: Record<string, string>) => Promise<Answer>;

/** GETs on a keep-alive agent of 16 sockets; close() destroys it. */
export function keepAliveGet(): { readonly get: Get; close(): void } {
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });
  const get: Get = (url, headers) =>
    new Promise((resolve, reject) => {
      const req = request(url, { agent, headers }, (res) => {
        let length = 0;
        res.on('data', (c: Buffer) => (length += c.length));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, length }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
  return { get, close: () => agent.destroy() };
}

export interface InboxOptions {
  readonly inbox: string;
  /** The reader's base URL and a key that reads every file. */
  readonly url: string;
  readonly key: string;
  readonly get: Get;
}

export interface Inbox {
  /** Write `bytes` under a dot-name in the inbox (the watcher ignores it), then rename it to `name`. */
  drop(name: string, bytes: Buffer): Promise<void>;
  /** Until the reader serves `bytes` as `name` (304 to its ETag, gzip asked for); the ETag. */
  served(name: string, bytes: Buffer): Promise<string>;
  /** The size of the newest version of every file dropped so far, summed. */
  publishedBytes(): number;
}

export function inboxOf(o: InboxOptions): Inbox {
  const published = new Map<string, number>();
  return {
    async drop(name, bytes) {
      const [staged] = await stage(o.inbox, [{ name, bytes }]);
      await rename(staged!.tmp, staged!.final);
      published.set(name, bytes.length);
    },
    async served(name, bytes) {
      const etag = `"${sha256(bytes).slice(0, 32)}"`;
      for (;;) {
        const res = await o.get(`${o.url}/v1/data/${name}`, { 'x-api-key': o.key, 'if-none-match': etag, 'accept-encoding': 'gzip' });
        if (res.status === 304) return etag;
        await sleep(50);
      }
    },
    publishedBytes: () => [...published.values()].reduce((a, b) => a + b, 0),
  };
}
