/**
 * The queue dashboard when the queue's Redis does not answer (src/ops/dashboard.ts), without
 * Redis: a BullMQ queue connected to a TCP server that takes connections and says nothing (a
 * paused Redis). A request to bull-board's API answers 503 problem+json with Retry-After at the
 * answer bound instead of hanging; the page itself (no Redis read) is still served; the answers
 * that never came fail when the queue closes, and nothing is sent twice or crashes.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { fastify, type FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIngestQueue, type IngestQueue } from '../../src/ingest/queue.js';
import { registerDashboard } from '../../src/ops/dashboard.js';
import { errorHandler } from '../../src/reader/problem.js';

const BOUND_MS = 300;

describe('the queue dashboard while Redis says nothing', () => {
  let silent: Server;
  const sockets = new Set<Socket>();
  let connection: Redis;
  let queue: IngestQueue;
  let app: FastifyInstance;

  beforeAll(async () => {
    silent = createServer((s) => {
      sockets.add(s);
      s.on('error', () => undefined);
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const { port } = silent.address() as { port: number };
    connection = new Redis(`redis://127.0.0.1:${port}`, { maxRetriesPerRequest: null, lazyConnect: true });
    connection.on('error', () => undefined);
    void connection.connect().catch(() => undefined);
    queue = createIngestQueue(connection, 'dashboard-timeout');
    queue.on('error', () => undefined);
    app = fastify();
    app.setErrorHandler(errorHandler);
    await registerDashboard(app, { queue, guard: (_request, _reply, done) => done(), actions: false, answerTimeoutMs: BOUND_MS });
    await app.ready();
  });

  afterAll(async () => {
    await app?.close();
    connection?.disconnect();
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => silent.close(() => r()));
  });

  it('answers the API with 503 + Retry-After at the bound, and still serves the page', async () => {
    // Bounded here too: before, the request had no answer at all.
    const ask = (url: string) =>
      Promise.race([app.inject({ url }), new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${url}: no answer`)), BOUND_MS + 5000))]);
    const t0 = performance.now();
    const api = await ask('/admin/queues/api/queues');
    const took = performance.now() - t0;
    expect(api.statusCode, api.body).toBe(503);
    expect(api.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(api.headers['retry-after']).toBe('5');
    expect(api.json<{ detail: string }>().detail).toMatch(/no answer from the queue within 0.3 s/);
    expect(took).toBeGreaterThanOrEqual(BOUND_MS - 5);
    expect(took).toBeLessThan(BOUND_MS + 4000);

    const page = await ask('/admin/queues');
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);

    // The unanswered commands fail once the connection is dropped: the late outcome goes nowhere.
    connection.disconnect();
    await new Promise((r) => setTimeout(r, 50));
    expect((await ask('/admin/queues')).statusCode).toBe(200);
  });
});
