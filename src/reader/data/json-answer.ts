/**
 * A 200 with a JSON body from the API's own endpoints (catalog, changes, history): never stored by a
 * shared cache, as every /v1 answer (one key's view must not reach another).
 */
import type { Answer } from './answer.js';
import { CACHE_CONTROL } from './data-route.js';

export function jsonAnswer(body: unknown): Answer {
  return { status: 200, headers: ['cache-control', CACHE_CONTROL, 'content-type', 'application/json'], body: Buffer.from(JSON.stringify(body)) };
}
