/**
 * GET /v1/data/{filename}: after authentication and the rate limit, the published bytes from
 * memory. A name is only ever a key of the in-memory map, never part of a path: anything not
 * published (including invalid names and traversal attempts) is 404; published but not on the
 * key's allow-list is 403. Conditional requests and content-coding negotiation on top.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { HttpProblem } from '../errors.js';
import type { PublishedCache } from './cache.js';
import { createCodingNegotiator, etagMatches, notModifiedSince } from './encoding.js';
import type { Variant, Version } from './version.js';

export const CACHE_CONTROL = 'private, no-cache';

export function dataHandler(published: PublishedCache) {
  const negotiate = createCodingNegotiator();

  const pick = (version: Version, acceptEncoding: string | undefined): Variant => {
    if (acceptEncoding === undefined || (version.br === undefined && version.gzip === undefined)) return version.identity;
    const pref = negotiate(acceptEncoding);
    if (pref.gzipFirst && pref.gzip && version.gzip) return version.gzip;
    if (pref.br && version.br) return version.br;
    if (pref.gzip && version.gzip) return version.gzip;
    return version.identity;
  };

  return function getData(request: FastifyRequest<{ Params: { '*': string } }>, reply: FastifyReply): FastifyReply {
    const name = request.params['*'];
    const principal = request.principal!;
    const version = published.get(name);
    if (version === undefined) {
      if (!published.isPending(name)) throw new HttpProblem('not_found', 'No file is published under this name. GET /v1/files lists yours.');
      if (!principal.allows(name)) throw new HttpProblem('forbidden', 'This file is not on the allow-list of your key.');
      throw new HttpProblem('unavailable', 'This file is being loaded; retry in a moment.', { 'retry-after': '1' });
    }
    if (!principal.allows(name)) throw new HttpProblem('forbidden', 'This file is not on the allow-list of your key.');

    const headers = request.headers;
    const variant = pick(version, headers['accept-encoding']);
    reply.header('etag', variant.etag);
    reply.header('last-modified', version.lastModified);
    reply.header('cache-control', CACHE_CONTROL);
    reply.header('vary', 'Accept-Encoding');
    const inm = headers['if-none-match'];
    const ims = headers['if-modified-since'];
    if (inm !== undefined ? etagMatches(inm, variant.etag) : ims !== undefined && notModifiedSince(ims, version.lastModifiedMs)) {
      return reply.code(304).send();
    }
    reply.header('content-type', 'application/json');
    if (variant.coding !== 'identity') reply.header('content-encoding', variant.coding);
    return reply.send(variant.body);
  };
}
