//! The Lua scripts of [`RedisStore`](super::RedisStore). Each runs atomically on the
//! server, so every conditional write of the store's contract is one script call.
//!
//! Conventions: `ARGV[1]` is the key prefix; instants are epoch-ms integer strings;
//! an absent optional value is the empty string. Lua numbers are doubles, so numbers
//! are written back with `%.0f` (exact below 2^53: tokens are µs, about 2^51), never
//! with `tostring`, and equality of stored instants and versions is compared as
//! strings exactly as the engine wrote them.
//!
//! Keys under the prefix `P`:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `P job:<id>` | hash | `def` (JSON), `enabled`, `version`, `next`, `trigger`, `attempt`, `token`, `running`, `created`, `updated` |
//! | `P jobs` | sorted set | every job id (score 0, lexical order) |
//! | `P due` | sorted set | enabled, idle jobs with a next fire; score `next` |
//! | `P run:<id>` | hash | `job`, `fire`, `trigger`, `node`, `attempt`, `token`, `status`, `started`, `ended`, `error`, `retry` |
//! | `P runs`, `P runs:job:<id>` | sorted sets | run ids (score = id), for the run log |
//! | `P running` | sorted set | runs in `running` state |
//! | `P ended` | sorted set | finished runs, score `ended` (for purges) |
//! | `P stats:<day>`, `P stats:days` | hash, sorted set | run counts per status per UTC day number |
//! | `P node:<id>`, `P nodes` | hash, sorted set | node info and last beat (score) |
//! | `P alarm:<id>`, `P alarms` | hash, sorted set | outbox events; all ids |
//! | `P alarms:ready`, `P alarms:sending` | sorted sets | claimable at (score), claim lapses at (score) |
//! | `P seq:run`, `P seq:alarm`, `P schema` | strings | id sequences, schema version |

/// Shared helpers, prepended to every script.
const PRELUDE: &str = r"
local P = ARGV[1]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function fmt(n) return string.format('%.0f', n) end
local function reindex(id)
  local jk = P .. 'job:' .. id
  local f = redis.call('HMGET', jk, 'enabled', 'next', 'running')
  if f[1] == '1' and f[2] and f[2] ~= '' and (not f[3] or f[3] == '') then
    redis.call('ZADD', P .. 'due', f[2], id)
  else
    redis.call('ZREM', P .. 'due', id)
  end
end
local function day_of(ms) return fmt(math.floor(tonumber(ms) / 86400000)) end
local function enqueue(ev, nows)
  local aid = redis.call('INCR', P .. 'seq:alarm')
  redis.call('HSET', P .. 'alarm:' .. aid, 'event', ev, 'status', 'pending', 'attempts', '0',
    'next', nows, 'claimed_by', '', 'claim_until', '', 'last_error', '', 'created', nows)
  redis.call('ZADD', P .. 'alarms', aid, aid)
  redis.call('ZADD', P .. 'alarms:ready', nows, aid)
  return aid
end
";

/// The full source of a script: the prelude and its body.
pub(super) fn source(body: &str) -> String {
    format!("{PRELUDE}\n{body}")
}

/// ARGV: P, id, def, enabled (`1`/`0`), next. Returns `created`, `updated` or `unchanged`.
pub(super) const UPSERT: &str = r"
local id, def, en, nxt = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local jk = P .. 'job:' .. id
local nows = fmt(now_ms())
local cur = redis.call('HGET', jk, 'def')
if cur == def then return 'unchanged' end
if cur then
  redis.call('HINCRBY', jk, 'version', 1)
  redis.call('HSET', jk, 'def', def, 'enabled', en, 'next', nxt, 'trigger', 'schedule',
    'attempt', '0', 'updated', nows)
  reindex(id)
  return 'updated'
end
redis.call('HSET', jk, 'def', def, 'enabled', en, 'version', '1', 'next', nxt,
  'trigger', 'schedule', 'attempt', '0', 'token', '0', 'running', '', 'created', nows,
  'updated', nows)
redis.call('ZADD', P .. 'jobs', 0, id)
reindex(id)
return 'created'
";

/// ARGV: P, id. Returns 1 when the job existed.
pub(super) const REMOVE: &str = r"
local id = ARGV[2]
redis.call('ZREM', P .. 'due', id)
redis.call('ZREM', P .. 'jobs', id)
return redis.call('DEL', P .. 'job:' .. id)
";

/// ARGV: P, id, enabled, def, next, expected version.
/// Returns -1 (no such job), 0 (version moved: read again) or 1 (done).
pub(super) const SET_ENABLED: &str = r"
local id, en, def, nxt, ver = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local jk = P .. 'job:' .. id
local f = redis.call('HMGET', jk, 'version', 'enabled')
if not f[1] then return -1 end
if f[1] ~= ver then return 0 end
if f[2] == en then return 1 end
redis.call('HINCRBY', jk, 'version', 1)
redis.call('HSET', jk, 'def', def, 'enabled', en, 'updated', fmt(now_ms()))
if en == '1' then
  redis.call('HSET', jk, 'next', nxt, 'trigger', 'schedule', 'attempt', '0')
end
reindex(id)
return 1
";

/// ARGV: P, id, at. Returns 0 when the job does not exist.
pub(super) const TRIGGER: &str = r"
local id = ARGV[2]
local jk = P .. 'job:' .. id
if redis.call('EXISTS', jk) == 0 then return 0 end
redis.call('HSET', jk, 'next', ARGV[3], 'trigger', 'manual', 'attempt', '0')
reindex(id)
return 1
";

/// ARGV: P, until, limit. Returns id, next, def, version, trigger, attempt per fire.
pub(super) const DUE: &str = r"
local ids = redis.call('ZRANGEBYSCORE', P .. 'due', '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', P .. 'job:' .. id, 'next', 'def', 'version', 'trigger', 'attempt')
  if f[1] and f[2] then
    table.insert(out, id)
    for j = 1, 5 do table.insert(out, f[j]) end
  end
end
return out
";

/// ARGV: P, n, then per item: job, fire, version, token, node, attempt, trigger.
/// Returns per item a triple: (`ok`, run id, started) or (refusal, current token, '').
pub(super) const START: &str = r"
local now = now_ms()
local nows, day = fmt(now), day_of(now)
local out = {}
local i = 3
for _ = 1, tonumber(ARGV[2]) do
  local id, fire, ver, tok, node, att, trig =
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  i = i + 7
  local jk = P .. 'job:' .. id
  local f = redis.call('HMGET', jk, 'enabled', 'version', 'running', 'next', 'token')
  local code, cur = nil, ''
  if not f[1] then code = 'not_found'
  elseif f[1] ~= '1' then code = 'disabled'
  elseif f[2] ~= ver then code = 'changed'
  elseif f[3] and f[3] ~= '' then code = 'running'
  elseif f[4] ~= fire then code = 'not_due'
  elseif tonumber(f[5]) > tonumber(tok) then code = 'fenced'; cur = f[5]
  end
  if code then
    table.insert(out, code); table.insert(out, cur); table.insert(out, '')
  else
    local rid = redis.call('INCR', P .. 'seq:run')
    redis.call('HSET', P .. 'run:' .. rid, 'job', id, 'fire', fire, 'trigger', trig,
      'node', node, 'attempt', att, 'token', tok, 'status', 'running', 'started', nows,
      'ended', '', 'error', '', 'retry', '0')
    redis.call('ZADD', P .. 'runs', rid, rid)
    redis.call('ZADD', P .. 'runs:job:' .. id, rid, rid)
    redis.call('ZADD', P .. 'running', rid, rid)
    redis.call('HINCRBY', P .. 'stats:' .. day, 'running', 1)
    redis.call('ZADD', P .. 'stats:days', day, day)
    redis.call('HSET', jk, 'token', tok, 'running', rid)
    redis.call('ZREM', P .. 'due', id)
    table.insert(out, 'ok'); table.insert(out, rid); table.insert(out, nows)
  end
end
return out
";

/// ARGV: P, n, then per item: run, job, token, takeover, status, has error, error,
/// will retry, version, next at, next trigger, next attempt, alarm count, alarm JSON….
/// Returns per item a triple: (`ok`, rescheduled, ended) or (refusal, current token, '').
pub(super) const FINISH: &str = r"
local now = now_ms()
local nows = fmt(now)
local out = {}
local i = 3
for _ = 1, tonumber(ARGV[2]) do
  local rid, jid, tok, takeover, st, has_err, err, retry, ver, nat, ntrig, natt, na =
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6],
    ARGV[i + 7], ARGV[i + 8], ARGV[i + 9], ARGV[i + 10], ARGV[i + 11], tonumber(ARGV[i + 12])
  local alarms_at = i + 13
  i = alarms_at + na
  local rk = P .. 'run:' .. rid
  local r = redis.call('HMGET', rk, 'status', 'token', 'fire', 'job', 'started')
  if not r[1] then
    table.insert(out, 'not_found'); table.insert(out, ''); table.insert(out, '')
  elseif r[1] ~= 'running' then
    table.insert(out, 'not_running'); table.insert(out, ''); table.insert(out, '')
  else
    local jk = P .. 'job:' .. jid
    local jf = redis.call('HMGET', jk, 'token', 'running', 'version', 'next')
    local current = r[2]
    if jf[1] then current = jf[1] end
    local t, c, rt = tonumber(tok), tonumber(current), tonumber(r[2])
    local ok
    if takeover == '1' then ok = t >= c and t >= rt else ok = t == rt and t >= c end
    if not ok or r[4] ~= jid then
      table.insert(out, 'fenced'); table.insert(out, current); table.insert(out, '')
    else
      local resched = '0'
      if jf[1] then
        redis.call('HSET', jk, 'token', tok)
        if jf[2] == rid then redis.call('HSET', jk, 'running', '') end
        if jf[3] == ver and jf[4] == r[3] then
          redis.call('HSET', jk, 'next', nat, 'trigger', ntrig, 'attempt', natt)
          resched = '1'
        end
        reindex(jid)
      end
      local e = ''
      if has_err == '1' then e = err end
      redis.call('HSET', rk, 'status', st, 'ended', nows, 'error', e, 'has_error', has_err,
        'retry', retry)
      redis.call('ZREM', P .. 'running', rid)
      redis.call('ZADD', P .. 'ended', now, rid)
      local day = day_of(r[5])
      redis.call('HINCRBY', P .. 'stats:' .. day, 'running', -1)
      redis.call('HINCRBY', P .. 'stats:' .. day, st, 1)
      for k = alarms_at, alarms_at + na - 1 do enqueue(ARGV[k], nows) end
      table.insert(out, 'ok'); table.insert(out, resched); table.insert(out, nows)
    end
  end
end
return out
";

/// ARGV: P, before, chunk. Deletes up to `chunk` runs that ended before `before`;
/// returns how many.
pub(super) const PURGE: &str = r"
local ids = redis.call('ZRANGEBYSCORE', P .. 'ended', '-inf', '(' .. ARGV[2], 'LIMIT', 0,
  tonumber(ARGV[3]))
for _, rid in ipairs(ids) do
  local rk = P .. 'run:' .. rid
  local r = redis.call('HMGET', rk, 'job', 'status', 'started')
  if r[1] then
    redis.call('HINCRBY', P .. 'stats:' .. day_of(r[3]), r[2], -1)
    redis.call('ZREM', P .. 'runs:job:' .. r[1], rid)
  end
  redis.call('DEL', rk)
  redis.call('ZREM', P .. 'runs', rid)
  redis.call('ZREM', P .. 'ended', rid)
end
return #ids
";

/// ARGV: P, node id, info JSON. Returns the store's now.
pub(super) const HEARTBEAT: &str = r"
local now = now_ms()
local nows = fmt(now)
redis.call('HSET', P .. 'node:' .. ARGV[2], 'info', ARGV[3], 'beat', nows)
redis.call('ZADD', P .. 'nodes', now, ARGV[2])
return nows
";

/// ARGV: P, silent ms. Removes nodes silent for longer; returns their ids.
pub(super) const REAP: &str = r"
local cutoff = now_ms() - tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', P .. 'nodes', '-inf', '(' .. fmt(cutoff))
for _, id in ipairs(ids) do
  redis.call('DEL', P .. 'node:' .. id)
  redis.call('ZREM', P .. 'nodes', id)
end
return ids
";

/// ARGV: P, node id. Returns 1 when it was registered.
pub(super) const DEREGISTER: &str = r"
redis.call('DEL', P .. 'node:' .. ARGV[2])
return redis.call('ZREM', P .. 'nodes', ARGV[2])
";

/// ARGV: P, limit. Ids of running runs whose node is not registered, oldest first.
pub(super) const ORPHANED: &str = r"
local out = {}
local limit = tonumber(ARGV[2])
for _, rid in ipairs(redis.call('ZRANGE', P .. 'running', 0, -1)) do
  if #out >= limit then break end
  local node = redis.call('HGET', P .. 'run:' .. rid, 'node')
  if node and not redis.call('ZSCORE', P .. 'nodes', node) then table.insert(out, rid) end
end
return out
";

/// ARGV: P, n, event JSON…. Returns the new ids.
pub(super) const ENQUEUE: &str = r"
local nows = fmt(now_ms())
local out = {}
for k = 3, 2 + tonumber(ARGV[2]) do table.insert(out, enqueue(ARGV[k], nows)) end
return out
";

/// ARGV: P, owner, limit, lease ms. Claims due and lapsed events, lowest id first;
/// returns their ids.
pub(super) const CLAIM_ALARMS: &str = r"
local now = now_ms()
local limit = tonumber(ARGV[3])
local ids = {}
for _, set in ipairs({'alarms:ready', 'alarms:sending'}) do
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. set, '-inf', fmt(now), 'LIMIT', 0, limit)) do
    table.insert(ids, tonumber(id))
  end
end
table.sort(ids)
local untils = fmt(now + tonumber(ARGV[4]))
local out = {}
for k = 1, math.min(limit, #ids) do
  local id = fmt(ids[k])
  local ak = P .. 'alarm:' .. id
  redis.call('ZREM', P .. 'alarms:ready', id)
  redis.call('ZADD', P .. 'alarms:sending', untils, id)
  redis.call('HSET', ak, 'status', 'sending', 'claimed_by', ARGV[2], 'claim_until', untils)
  redis.call('HINCRBY', ak, 'attempts', 1)
  table.insert(out, id)
end
return out
";

/// ARGV: P, id, owner, status, error, retry at. Returns 1 when written.
pub(super) const COMPLETE_ALARM: &str = r"
local id, st, retry = ARGV[2], ARGV[4], ARGV[6]
local ak = P .. 'alarm:' .. id
local f = redis.call('HMGET', ak, 'status', 'claimed_by')
if f[1] ~= 'sending' or f[2] ~= ARGV[3] then return 0 end
redis.call('ZREM', P .. 'alarms:sending', id)
redis.call('HSET', ak, 'status', st, 'claimed_by', '', 'claim_until', '', 'next', retry)
if st == 'failed' then
  redis.call('HSET', ak, 'last_error', ARGV[5])
  if retry ~= '' then redis.call('ZADD', P .. 'alarms:ready', retry, id) end
end
return 1
";
