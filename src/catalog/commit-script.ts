/**
 * The catalog's commit, one Lua script run atomically in Redis (redis-catalog.ts calls it): the
 * newest-wins rule, the change log, the versions list and the history index, in one step.
 */
// KEYS: catalog hash, seq counter, versions list, change log (stream). ARGV: filename, entry JSON,
// generatedAtMs, sha256, keepVersions, channel, publishedAtMs, log max entries (0: untrimmed), log
// cutoff ms (0: none), the change's JSON for the log (the entry's fields a consumer sees), the
// SHA-256 of the bytes as received when generated_at was stamped ('' otherwise: see
// src/ingest/publish/decide.ts, the same rule). Equal generated_at with new bytes publishes (a correction). Every published
// change is appended to the log under the id <seq>-0, with the sha256 it replaced; the log is
// trimmed by length, and by age a bounded number of entries per commit.
// History (KEYS 5, 6; ARGV: size, history max versions, history cutoff ms): every publication is
// added to the filename's history (history-index.ts), scored by its published_at (never below the
// newest already there, so the order of scores is the order of commits); the oldest are trimmed
// by count and age, a bounded number per commit, never the one just added. A sha256 is returned
// as evicted (its object may be deleted) only when no retained publication, the versions list nor
// the current entry uses it; the trimmed members are returned too (their store records go), and
// the newest one trimmed is kept (field t of the refs hash): a rebuild never adds it or older back.
// KEYS 7, ARGV 15: the epoch key, and '1' when a catalog without it takes no commit ('unready':
// it must be restored from the store first, restore.ts).
export const COMMIT_LUA = `
if ARGV[15] == '1' and redis.call('EXISTS', KEYS[7]) == 0 then return {'unready'} end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local prev = ''
if cur then
  local c = cjson.decode(cur)
  if c.sha256 == ARGV[4] or (ARGV[11] ~= '' and c.sourceSha256 == ARGV[11]) then
    return {'unchanged', cur, redis.call('GET', KEYS[2]) or '0'}
  end
  if tonumber(c.generatedAtMs) > tonumber(ARGV[3]) then
    return {'superseded', cur, redis.call('GET', KEYS[2]) or '0'}
  end
  prev = c.sha256
end
local seq = redis.call('INCR', KEYS[2])
local id = seq .. '-0'
if not pcall(redis.call, 'XADD', KEYS[4], id, 'e', ARGV[10], 'p', prev, 't', ARGV[7]) then
  -- The counter went back (Redis lost it, the log survived): the log starts again from here.
  redis.call('DEL', KEYS[4])
  redis.call('XADD', KEYS[4], id, 'e', ARGV[10], 'p', prev, 't', ARGV[7])
end
if tonumber(ARGV[8]) > 0 then redis.call('XTRIM', KEYS[4], 'MAXLEN', '~', ARGV[8]) end
local cutoff = tonumber(ARGV[9])
if cutoff > 0 then
  -- A few of the oldest per commit: enough to keep up, as each commit adds one.
  local old = redis.call('XRANGE', KEYS[4], '-', '+', 'COUNT', 4)
  local upto = nil
  for i = 1, #old do
    local f = old[i][2]
    if tonumber(f[6]) < cutoff and old[i][1] ~= id then upto = old[i][1] else break end
  end
  if upto then
    local n = tonumber(string.match(upto, '^(%d+)'))
    redis.call('XTRIM', KEYS[4], 'MINID', (n + 1) .. '-0')
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('LREM', KEYS[3], 0, ARGV[4])
redis.call('LPUSH', KEYS[3], ARGV[4])
local keep = tonumber(ARGV[5])
local candidates = redis.call('LRANGE', KEYS[3], keep, -1)
redis.call('LTRIM', KEYS[3], 0, keep - 1)
local score = tonumber(ARGV[7])
local top = redis.call('ZREVRANGE', KEYS[5], 0, 0, 'WITHSCORES')
if top[2] and tonumber(top[2]) > score then score = tonumber(top[2]) end
local hm = string.format('%015d', score) .. ':' .. string.format('%015d', seq) .. ':' .. ARGV[4] .. ':' .. ARGV[12] .. ':' .. ARGV[3]
redis.call('ZADD', KEYS[5], score, hm)
redis.call('HINCRBY', KEYS[6], 'n:' .. ARGV[4], 1)
redis.call('HSET', KEYS[6], 'm:' .. string.sub(ARGV[4], 1, 32), hm)
local removed = {}
local over = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[13])
if over > 0 then removed = redis.call('ZRANGE', KEYS[5], 0, math.min(over, 16) - 1) end
local hcut = tonumber(ARGV[14])
if #removed < 16 and hcut > 0 then
  local old = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. ARGV[14], 'LIMIT', #removed, 16 - #removed)
  for i = 1, #old do removed[#removed + 1] = old[i] end
end
local trimmed = {}
for i = 1, #removed do
  local m = removed[i]
  if m ~= hm then
    redis.call('ZREM', KEYS[5], m)
    trimmed[#trimmed + 1] = m
    local t = redis.call('HGET', KEYS[6], 't')
    if not t or m > t then redis.call('HSET', KEYS[6], 't', m) end
    local sha = string.match(m, '^[^:]*:[^:]*:([^:]*):')
    if redis.call('HINCRBY', KEYS[6], 'n:' .. sha, -1) <= 0 then
      redis.call('HDEL', KEYS[6], 'n:' .. sha, 'm:' .. string.sub(sha, 1, 32))
      candidates[#candidates + 1] = sha
    end
  end
end
local evicted = {}
local seen = {}
for i = 1, #candidates do
  local sha = candidates[i]
  if not seen[sha] and sha ~= ARGV[4] and redis.call('HEXISTS', KEYS[6], 'n:' .. sha) == 0 and not redis.call('LPOS', KEYS[3], sha) then
    evicted[#evicted + 1] = sha
  end
  seen[sha] = true
end
redis.call('PUBLISH', ARGV[6], '{"seq":' .. seq .. ',"entry":' .. ARGV[2] .. '}')
local out = {'published', ARGV[2], tostring(seq), hm, tostring(#evicted)}
for i = 1, #evicted do out[#out + 1] = evicted[i] end
for i = 1, #trimmed do out[#out + 1] = trimmed[i] end
return out
`;
