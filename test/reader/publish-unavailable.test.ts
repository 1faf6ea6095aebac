/**
 * A PUT whose publisher fails (Redis or the store away, or the publisher not started: it is
 * started on the first upload) is answered `503 unavailable` with Retry-After, a real upload and a
 * dry run alike, and the reader goes on serving. In process, real Redis, a publisher that throws.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PublishPort } from '../../src/ports/publish.js';
import { createReaderFixture, oddsDocument, type ReaderFixture } from '../helpers/reader-fixture.js';

const FILE = 'site_pregame_northwind_soccer.json';

let fx: ReaderFixture;
let publisherKey: string;
const calls: string[] = [];

const failing: PublishPort = {
  submit: async () => {
    calls.push('submit');
    throw new Error('Redis away');
  },
  check: async () => {
    calls.push('check');
    throw new Error('Redis away');
  },
};

beforeAll(async () => {
  fx = await createReaderFixture('publish-unavailable');
  publisherKey = (await fx.keyStore.create({ name: 'publisher', plan: 'pro', publish: ['site_*'] })).key;
});

afterAll(async () => {
  await fx?.cleanup();
});

describe('a PUT whose publisher fails', () => {
  it('is answered 503 with Retry-After, upload and dry run alike, and the reader goes on', async () => {
    const reader = await fx.start({ publisher: failing });
    try {
      await reader.state.ready;
      const body = JSON.stringify({ ...oddsDocument('northwind', 'soccer'), generated_at: new Date().toISOString() });
      for (const query of ['', '?dry_run=1']) {
        const res = await reader.app.inject({
          method: 'PUT',
          url: `/v1/data/${FILE}${query}`,
          headers: { 'x-api-key': publisherKey, 'content-type': 'application/json' },
          payload: body,
        });
        expect(res.statusCode, `PUT${query}: ${res.body}`).toBe(503);
        expect(res.headers['retry-after']).toBe('5');
        expect(res.headers['content-type']).toContain('application/problem+json');
        expect(res.json()).toMatchObject({ status: 503, type: 'https://oddsfiles.dev/problems/unavailable' });
      }
      expect(calls).toEqual(['submit', 'check']);
      const health = await reader.app.inject({ url: '/healthz' });
      expect(health.statusCode).toBe(200);
    } finally {
      await reader.close();
    }
  });
});
