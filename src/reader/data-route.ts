/**
 * GET /v1/data/{filename}: after authentication and the rate limit, the published bytes from
 * memory. A name is only ever a key of the in-memory map, never part of a path: anything not
 * published (including invalid names and traversal attempts) is 404; published but not on the
 * key's allow-list is 403. Conditional requests and content-coding negotiation on top: the first
 * request of a version that accepts a coding waits for it to be made (a few ms, once per version
 * and coding); every other request is answered from memory at once.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { HttpProblem } from '../errors.js';
import type { PublishedCache } from './cache.js';
import { createCodingNegotiator, etagMatches, notModifiedSince, type CompressedCoding } from './encoding.js';
import type { Variant, Version } from './version.js';

export const CACHE_CONTROL = 'private, no-cache';

export function dataHandler(published: PublishedCache) {
  const negotiate = createCodingNegotiator();

  /** The compressed codings the client takes, in the order to try them. */
  const codings = (acceptEncoding: string | undefined): readonly CompressedCoding[] => {
    if (acceptEncoding === undefined) return NONE;
    const pref = negotiate(acceptEncoding);
    if (pref.br && pref.gzip) return pref.gzipFirst ? GZIP_BR : BR_GZIP;
    return pref.br ? BR : pref.gzip ? GZIP : NONE;
  };

  /** The first of `order` that exists (made now if need be), else identity. */
  const pick = (version: Version, order: readonly CompressedCoding[], from = 0): Variant | Promise<Variant> => {
    for (let i = from; i < order.length; i++) {
      const v = published.variant(version, order[i]!);
      if (v === undefined) continue;
      if (v instanceof Promise) return v.then((made) => made ?? pick(version, order, i + 1));
      return v;
    }
    return version.identity;
  };

  return function getData(request: FastifyRequest<{ Params: { '*': string } }>, reply: FastifyReply): FastifyReply | Promise<FastifyReply> {
    const name = request.params['*'];
    const principal = request.principal!;
    const version = published.get(name);
    if (version === undefined) {
      if (!published.isPending(name)) throw new HttpProblem('not_found', 'No file is published under this name. GET /v1/files lists yours.');
      if (!principal.allows(name)) throw new HttpProblem('forbidden', 'This file is not on the allow-list of your key.');
      throw new HttpProblem('unavailable', 'This file is being loaded; retry in a moment.', { 'retry-after': '1' });
    }
    if (!principal.allows(name)) throw new HttpProblem('forbidden', 'This file is not on the allow-list of your key.');

    const variant = pick(version, codings(request.headers['accept-encoding']));
    if (variant instanceof Promise) return variant.then((v) => respond(request, reply, version, v));
    return respond(request, reply, version, variant);
  };

  function respond(request: FastifyRequest, reply: FastifyReply, version: Version, variant: Variant): FastifyReply {
    const headers = request.headers;
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
  }
}

const NONE: readonly CompressedCoding[] = [];
const BR: readonly CompressedCoding[] = ['br'];
const GZIP: readonly CompressedCoding[] = ['gzip'];
const BR_GZIP: readonly CompressedCoding[] = ['br', 'gzip'];
const GZIP_BR: readonly CompressedCoding[] = ['gzip', 'br'];
