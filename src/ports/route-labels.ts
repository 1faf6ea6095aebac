/**
 * Route labels shared by the reader (which counts the answers it gives before Fastify routes a
 * request) and the operator metrics (which count Fastify's): both must use the same label.
 */

/** The route label of responses that matched no route (404s, edge answers): never the raw URL. */
export const UNMATCHED_ROUTE = 'unmatched';
