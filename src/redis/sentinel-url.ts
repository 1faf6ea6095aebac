/**
 * A Sentinel URL, `redis+sentinel://[user:pass@]host:port[,host:port…]/<master-name>[?db=N]`, as
 * ioredis options: the sentinels to ask, the primary's name, the database and the credentials of
 * the Redis servers (`sentinel_password=` for sentinels that want one). Kept free of ioredis itself
 * so that the configuration checks a URL without loading the client.
 */
import type { RedisOptions } from 'ioredis';
import { ConfigError } from '../errors.js';

const SENTINEL_SCHEME = 'redis+sentinel:';

/** The ioredis options of a Sentinel URL; undefined for a plain Redis URL. */
export function sentinelOptions(url: string): RedisOptions | undefined {
  if (!url.startsWith(`${SENTINEL_SCHEME}//`)) return undefined;
  const m = /^redis\+sentinel:\/\/(?:([^@/]*)@)?([^/?#]+)\/([^/?#]+)\/?(?:\?([^#]*))?$/.exec(url);
  const bad = (why: string) =>
    new ConfigError(undefined, 'REDIS_URL', `${why}: write redis+sentinel://[user:pass@]host:port[,host:port…]/<master-name>[?db=N]`);
  if (!m) throw bad('not a Sentinel URL');
  const [, auth, hosts, name, query] = m;
  const sentinels = hosts!.split(',').map((hp) => {
    const hm = /^(\[[^\]]+\]|[^:]+)(?::(\d{1,5}))?$/.exec(hp);
    if (!hm) throw bad(`"${hp}" is not host:port`);
    return { host: hm[1]!.replace(/^\[|\]$/g, ''), port: hm[2] === undefined ? 26379 : Number(hm[2]) };
  });
  const params = new URLSearchParams(query ?? '');
  const db = params.get('db');
  if (db !== null && !/^\d{1,2}$/.test(db)) throw bad(`db=${db} is not a database number`);
  const [user, pass] = auth === undefined ? [] : auth.includes(':') ? [auth.slice(0, auth.indexOf(':')), auth.slice(auth.indexOf(':') + 1)] : [undefined, auth];
  const sentinelPassword = params.get('sentinel_password');
  return {
    sentinels,
    name: decodeURIComponent(name!),
    ...(db !== null ? { db: Number(db) } : {}),
    ...(user ? { username: decodeURIComponent(user) } : {}),
    ...(pass ? { password: decodeURIComponent(pass) } : {}),
    ...(sentinelPassword !== null ? { sentinelPassword } : {}),
    // Reconnect at once when the sentinels announce a new primary, not when the old one times out.
    failoverDetector: true,
    sentinelRetryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 5), 2000),
  };
}
