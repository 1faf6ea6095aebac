/** GET /v1/files: the published filenames the key may download, sorted, as `{"files": [...]}`. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FileLists } from './allow.js';
import { CACHE_CONTROL } from './data-route.js';
import { etagMatches } from './encoding.js';

export function filesHandler(lists: FileLists) {
  return function listFiles(request: FastifyRequest, reply: FastifyReply): FastifyReply {
    const list = lists.forPrincipal(request.principal!);
    reply.header('etag', list.etag);
    reply.header('cache-control', CACHE_CONTROL);
    const inm = request.headers['if-none-match'];
    if (inm !== undefined && etagMatches(inm, list.etag)) return reply.code(304).send();
    reply.header('content-type', 'application/json');
    return reply.send(list.body);
  };
}
