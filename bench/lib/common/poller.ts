/** An API client on one keep-alive socket, as a tight poller of /v1/data uses it. */
import { Agent, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { nowMs } from './stats.js';

export interface HttpResult {
  readonly status: number;
  readonly etag: string | undefined;
  readonly bytes: number;
}

export class Poller {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 1 });
  private readonly url: URL;

  constructor(
    base: string,
    private readonly key: string,
  ) {
    this.url = new URL(base);
  }

  get(path: string, headers: Record<string, string> = {}): Promise<HttpResult> {
    return new Promise((resolve, reject) => {
      const req = request({ host: this.url.hostname, port: this.url.port, path, agent: this.agent, headers: { 'x-api-key': this.key, ...headers } }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, etag: res.headers.etag, bytes }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
  }

  /**
   * Poll `path` back to back (or `gapMs` apart), with If-None-Match `previous`, until it answers
   * 200 with `etag`: the wall-clock time of that answer and the polls it took, or undefined after
   * `timeoutMs`. 404 and 503 are waited through; another error status throws.
   */
  async until(path: string, etag: string, previous: string | undefined, timeoutMs: number, gapMs = 0): Promise<{ at: number; polls: number } | undefined> {
    const deadline = nowMs() + timeoutMs;
    let polls = 0;
    const headers: Record<string, string> = previous ? { 'if-none-match': previous } : {};
    while (nowMs() < deadline) {
      const r = await this.get(path, headers);
      polls++;
      if (r.status === 200 && r.etag === etag) return { at: nowMs(), polls };
      if (r.status >= 400 && r.status !== 404 && r.status !== 503) throw new Error(`GET ${path}: ${r.status}`);
      if (gapMs > 0) await sleep(gapMs);
    }
    return undefined;
  }

  /** Until the reader answers `path` with 304 for `etag` (it holds that variant), at most `timeoutMs`. */
  async untilHeld(path: string, etag: string, headers: Record<string, string> = {}, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((await this.get(path, { ...headers, 'if-none-match': etag })).status !== 304) {
      if (Date.now() > deadline) throw new Error(`GET ${path}: never answered ${etag} within ${timeoutMs} ms`);
      await sleep(20);
    }
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Until `base`'s /healthz answers 200 (a process started on a port chosen in advance). */
export async function waitHealthy(base: string, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (
    !(await fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (Date.now() > deadline) throw new Error(`${what} did not start`);
    await sleep(50);
  }
}
