/**
 * @oddsfiles/client: keep the current version of every odds file a key may read, in memory or
 * (with `@oddsfiles/client/mirror`) in a folder. Needs only `fetch`, web streams and Web Crypto.
 */
export { createClient, parseBaseUrl, type Change, type ClientOptions, type OddsfilesClient } from './client.js';
export { OddsfilesClientError, type FatalCode } from './errors.js';
export type { Notice } from './http.js';
export { etagOf, identityEtag, sha256Hex } from './digest.js';
export { makeVersion, type FileVersion } from './version.js';
