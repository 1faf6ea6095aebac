/**
 * The client's address, as Fastify's `request.ip` gives it: with `reader.trust_proxy` off, the
 * socket's peer; on, the nearest address of X-Forwarded-For that is not a trusted proxy
 * (@fastify/proxy-addr). One trust function serves both lanes: it is handed to Fastify as its
 * `trustProxy`, and the front door asks the same function, so both log and limit the same address.
 */
import type { IncomingMessage } from 'node:http';
import proxyAddr from '@fastify/proxy-addr';

export type TrustFunction = (address: string, hop: number) => boolean;

/**
 * The trust function of a `trust_proxy` setting: `true` trusts every hop; a number N trusts the
 * N nearest hops, whoever they are (proxy-addr's and Express's meaning; Fastify 5.12 would trust
 * none and count every client as its proxy, so the reader hands Fastify this function instead);
 * a string is a comma-separated list of addresses, CIDRs or the names `loopback`, `linklocal`,
 * `uniquelocal`. Undefined when off (0, false, '').
 */
export function trustFunction(setting: boolean | string | number): TrustFunction | undefined {
  if (setting === false || setting === '' || setting === 0) return undefined;
  if (setting === true) return () => true;
  if (typeof setting === 'number') return (_address, hop) => hop < setting;
  return proxyAddr.compile(setting.split(',').map((s) => s.trim()));
}

/** Fastify's `request.ip` for a raw request. */
export function clientIp(trust: TrustFunction | undefined): (req: IncomingMessage) => string | undefined {
  if (trust === undefined) return (req) => req.socket.remoteAddress;
  return (req) => {
    const all = proxyAddr.all(req, trust);
    return all[all.length - 1];
  };
}
