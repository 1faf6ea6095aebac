/**
 * The client address behind proxies (src/reader/client-ip.ts), for each form of
 * `reader.trust_proxy`, from a real request over a real socket: the server reads
 * X-Forwarded-For as sent and the peer address of the connection (127.0.0.1).
 */
import { createServer, request, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientIp, trustFunction } from '../../src/reader/client-ip.js';

let port = 0;
let last: IncomingMessage | undefined;
const server = createServer((req, res) => {
  last = req;
  res.end();
});

beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

/** The address `trust_proxy: setting` names for a request carrying `xff`. */
async function ipFor(setting: boolean | string | number, xff?: string): Promise<string | undefined> {
  await new Promise<void>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', headers: xff === undefined ? {} : { 'x-forwarded-for': xff } }, (res) => {
      res.resume();
      res.on('end', resolve);
    });
    req.on('error', reject);
    req.end();
  });
  return clientIp(trustFunction(setting))(last!);
}

describe('the client address', () => {
  it('off (false, 0, empty): the peer, whatever X-Forwarded-For says', async () => {
    for (const off of [false, 0, '']) expect(await ipFor(off, '203.0.113.9')).toBe('127.0.0.1');
  });

  it('a hop count trusts that many nearest hops: the peer, then X-Forwarded-For from the right', async () => {
    expect(await ipFor(1, '203.0.113.9')).toBe('203.0.113.9');
    expect(await ipFor(1, '198.51.100.1, 203.0.113.9')).toBe('203.0.113.9');
    expect(await ipFor(2, '198.51.100.1, 203.0.113.9')).toBe('198.51.100.1');
    expect(await ipFor(1)).toBe('127.0.0.1');
  });

  it('addresses and CIDRs: only hops inside them are trusted', async () => {
    expect(await ipFor('loopback', '203.0.113.9')).toBe('203.0.113.9');
    expect(await ipFor('10.0.0.0/8', '203.0.113.9')).toBe('127.0.0.1');
    expect(await ipFor('127.0.0.1, 203.0.113.0/24', '198.51.100.1, 203.0.113.9')).toBe('198.51.100.1');
  });

  it('true: the leftmost address of X-Forwarded-For', async () => {
    expect(await ipFor(true, '198.51.100.1, 203.0.113.9')).toBe('198.51.100.1');
  });
});
