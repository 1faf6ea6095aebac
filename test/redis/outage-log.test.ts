/**
 * The classification behind the outage log (src/redis/outage-log.ts): which errors mean "Redis
 * cannot be reached", and that any other error of a BullMQ object stays at error with its stack.
 * The outage itself (warn once, info when back) is tested over a real outage in
 * test/faults/redis-log.test.ts; here the connection is the shared test Redis, up throughout.
 */
import { EventEmitter } from 'node:events';
import { Redis, ReplyError } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisOutageLog, isRedisConnectionError } from '../../src/redis/outage-log.js';
import { capturingLogger } from '../helpers/log.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';

describe('Redis connection errors', () => {
  it('tells a connection that failed from Redis answering with an error', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:16391'), { code: 'ECONNREFUSED', syscall: 'connect' });
    const maxRetries = Object.assign(new Error('Reached the max retries per request limit (which is 1). Refer to "maxRetriesPerRequest" option for details.'), {
      name: 'MaxRetriesPerRequestError',
    });
    for (const err of [
      refused,
      Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }),
      Object.assign(new Error('connect ETIMEDOUT'), { code: 'ETIMEDOUT' }),
      Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }),
      new Error('Connection is closed.'),
      maxRetries,
      new Error('wrapped', { cause: refused }),
    ]) {
      expect(isRedisConnectionError(err), err.message).toBe(true);
    }
    for (const err of [
      new ReplyError("OOM command not allowed when used memory > 'maxmemory'."),
      new ReplyError("READONLY You can't write against a read only replica."),
      new Error('Missing lock for job 12. moveToFinished'),
      new TypeError('x is not a function'),
      undefined,
      'ECONNREFUSED?',
    ]) {
      expect(isRedisConnectionError(err), String(err)).toBe(false);
    }
  });
});

describe('the outage log with Redis up', () => {
  let redis: Redis;
  beforeAll(async () => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    await redis.ping();
  });
  afterAll(() => {
    redis.disconnect();
  });

  it('logs any other error at error, whole (type, message, code, stack)', () => {
    const { log, lines } = capturingLogger('debug');
    const source = new EventEmitter();
    const outage = createRedisOutageLog({ log, connection: 'worker', redis, errorMsg: 'worker error' });
    outage.watch(source);
    source.emit('error', Object.assign(new Error('Missing lock for job 12. moveToFinished'), { code: 'ERR_LOCK' }));
    outage.close();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 50,
      msg: 'worker error',
      connection: 'worker',
      err: { type: 'Error', message: 'Missing lock for job 12. moveToFinished', code: 'ERR_LOCK' },
    });
    expect(String((lines[0]!.err as { stack: string }).stack)).toMatch(/^Error: Missing lock/);
  });

  it('a connection error while the connection is ready (a duplicate one reconnecting) is debug only', () => {
    const { log, lines } = capturingLogger('debug');
    const source = new EventEmitter();
    const outage = createRedisOutageLog({ log, connection: 'worker', redis, errorMsg: 'worker error' });
    outage.watch(source);
    source.emit('error', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }));
    outage.close();
    expect(outage.down).toBe(false);
    expect(lines.map((l) => [l.level, l.msg])).toEqual([[20, 'redis connection error']]);
  });
});
