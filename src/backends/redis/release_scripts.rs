//! The Lua of the Redis store's queues of releases (see
//! [`dependency`](crate::dependency)): the helpers every script gets (queue, take
//! under the rules, put back), the scripts of their own, and a release's member.
//!
//! Keys (beside those of [`scripts`](super::scripts)): `P rq:<id>` (sorted set:
//! members `<upstream job>|<upstream fire ms>` scored by when they were queued),
//! `P rc:<id>` (hash: each member's upstream run, JSON), `P ra:<id>` (hash: the
//! instants, in ms, a `waiting` alarm was raised for, to when), `P rt:<id>` (sorted
//! set: the members a job that joins by a window took, scored by when; their
//! `rc:` entries stay while they are kept, so the same key is not queued again),
//! `P rq` (sorted set: the jobs with a release queued), `P rt` (sorted set: the jobs
//! with taken members kept).

/// The release helpers, after the prelude in every script.
pub(super) const HELPERS: &str = r#"
-- Queues the release `member` (`<upstream job>|<fire>`) of job `id` with its
-- upstream run (JSON), unless the job is missing or the member is queued.
local function queue_release(id, member, run, nows)
  if redis.call('EXISTS', P .. 'job:' .. id) == 0 then return end
  if redis.call('HSETNX', P .. 'rc:' .. id, member, run) == 1 then
    redis.call('ZADD', P .. 'rq:' .. id, nows, member)
    redis.call('ZADD', P .. 'rq', 0, id)
  end
end
-- The instant of a member `<upstream job>|<fire>`.
local function fire_of(m)
  local bar = string.find(m, '|', 1, true)
  return string.sub(m, bar + 1)
end
-- Forgets the `waiting` marks of job `id`'s instants that no member of its queue
-- holds any more: `rows` is the queue as it was (members and scores), `gone` the
-- members just removed.
local function forget_alarms(id, gone, rows)
  local ak = P .. 'ra:' .. id
  if redis.call('EXISTS', ak) == 0 then return end
  local left = {}
  for k = 1, #rows, 2 do
    if not gone[rows[k]] then left[fire_of(rows[k])] = true end
  end
  for m in pairs(gone) do
    local f = fire_of(m)
    if not left[f] then redis.call('HDEL', ak, f) end
  end
end
-- rules::takes_release: job `id` may take a release at `now` when it is enabled, runs
-- nothing, and has no next fire or a scheduled one after `now`; rules::pick_release:
-- a release by a parent it does not wait for (`after` in its definition) is taken
-- alone, those by the parents it waits for as one group per instant once whole; the
-- candidate complete first wins (ties by instant, lone before group, source).
local function take_release(id, now)
  local q = P .. 'rq:' .. id
  local rows = redis.call('ZRANGE', q, 0, -1, 'WITHSCORES')
  if #rows == 0 then return 0 end
  local jk = P .. 'job:' .. id
  local f = redis.call('HMGET', jk, 'enabled', 'running', 'next', 'trigger', 'def')
  if f[1] ~= '1' or (f[2] and f[2] ~= '') then return 0 end
  if f[3] and f[3] ~= '' and not (f[4] == 'schedule' and tonumber(f[3]) > now) then
    return 0
  end
  local after, waits = {}, {}
  local ok, def = pcall(cjson.decode, f[5] or '')
  if ok and type(def) == 'table' and type(def.after) == 'table' then after = def.after end
  local windowed = ok and type(def) == 'table' and type(def.join_window) == 'table'
  for _, a in ipairs(after) do waits[a] = true end
  local best_key, best
  local function consider(key, members)
    local better = best_key == nil
    if not better then
      for k = 1, 4 do
        if key[k] ~= best_key[k] then better = key[k] < best_key[k]; break end
      end
    end
    if better then best_key, best = key, members end
  end
  local groups = {}
  for k = 1, #rows, 2 do
    local m, rel = rows[k], tonumber(rows[k + 1])
    local bar = string.find(m, '|', 1, true)
    local src, fire = string.sub(m, 1, bar - 1), tonumber(string.sub(m, bar + 1))
    if waits[src] then
      groups[fire] = groups[fire] or {}
      groups[fire][src] = { m, rel }
    else
      consider({ rel, fire, 0, src }, { m })
    end
  end
  for fire, g in pairs(groups) do
    local members, done, whole = {}, 0, true
    for _, a in ipairs(after) do
      local r = g[a]
      if not r then whole = false; break end
      members[#members + 1] = r[1]
      if r[2] > done then done = r[2] end
    end
    if whole then consider({ done, fire, 1, '' }, members) end
  end
  if not best then return 0 end
  local ck = P .. 'rc:' .. id
  local runs, gone = {}, {}
  for _, m in ipairs(best) do
    runs[#runs + 1] = redis.call('HGET', ck, m) or ''
    redis.call('ZREM', q, m)
    if windowed then
      -- Kept, marked taken (rules::WINDOW_KEPT): a later release of the window is
      -- not queued.
      redis.call('ZADD', P .. 'rt:' .. id, now, m)
      redis.call('ZADD', P .. 'rt', 0, id)
    else
      redis.call('HDEL', ck, m)
    end
    gone[m] = true
  end
  forget_alarms(id, gone, rows)
  if redis.call('ZCARD', q) == 0 then redis.call('ZREM', P .. 'rq', id) end
  redis.call('HSET', jk, 'next', fmt(now), 'trigger', 'upstream', 'attempt', '0', 'resume', '',
    'nctx', '{"upstream":[' .. table.concat(runs, ',') .. ']}')
  reindex(id)
  return 1
end
-- Epoch milliseconds of an instant as the engine writes one in JSON: RFC 3339 in UTC
-- (`2026-01-01T11:49:13.000Z`), or a number outside the calendar.
local function ms_of(t)
  if type(t) == 'number' then return t end
  local y, mo, d, h, mi, s, frac =
    string.match(t, '^(%-?%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)%.?(%d*)Z$')
  if not y then return nil end
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  if mo <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * ((mo + 9) % 12) + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  local days = era * 146097 + doe - 719468
  local ms = 0
  if frac ~= '' then ms = tonumber(string.sub(frac .. '000', 1, 3)) end
  return ((days * 24 + tonumber(h)) * 60 + tonumber(mi)) * 60000 + tonumber(s) * 1000 + ms
end
-- An upstream run (a flat object) as JSON. cjson writes numbers with 14 significant
-- digits, which would round a run id (ids reach 2^52 when issued from the clock), so
-- whole numbers are written whole.
local function encode_upstream(u)
  local parts = {}
  for k, v in pairs(u) do
    local s
    if type(v) == 'number' and v == math.floor(v) then s = fmt(v) else s = cjson.encode(v) end
    parts[#parts + 1] = cjson.encode(tostring(k)) .. ':' .. s
  end
  return '{' .. table.concat(parts, ',') .. '}'
end
-- rules::returns_release: before a change replaces job `id`'s next fire, a taken
-- release that has not started (trigger `upstream`, no run) goes back to the queue.
-- Returns whether one did.
local function requeue(id, nows)
  local f = redis.call('HMGET', P .. 'job:' .. id, 'trigger', 'running', 'nctx')
  if f[1] ~= 'upstream' or (f[2] and f[2] ~= '') then return false end
  local ok, ctx = pcall(cjson.decode, f[3] or '')
  if not ok or type(ctx) ~= 'table' or type(ctx.upstream) ~= 'table' then return false end
  for _, u in ipairs(ctx.upstream) do
    local at = ms_of(u.window or u.fire_at)
    if at and type(u.job) == 'string' then
      local m = u.job .. '|' .. fmt(at)
      -- Its mark as taken goes first, so it is queued again.
      if redis.call('ZREM', P .. 'rt:' .. id, m) == 1 then redis.call('HDEL', P .. 'rc:' .. id, m) end
      queue_release(id, m, encode_upstream(u), nows)
    end
  end
  return true
end
"#;

/// ARGV: P, limit, how long taken members are kept (ms). Forgets the taken members
/// kept longer; lets up to `limit` jobs with a release queued take their oldest
/// (`take_release`); returns how many did.
pub(super) const TAKE_RELEASES: &str = r"
local now = now_ms()
local limit = tonumber(ARGV[2])
local cutoff = now - tonumber(ARGV[3])
for _, id in ipairs(redis.call('ZRANGE', P .. 'rt', 0, -1)) do
  local tk = P .. 'rt:' .. id
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', tk, '-inf', '(' .. fmt(cutoff))) do
    redis.call('ZREM', tk, m)
    redis.call('HDEL', P .. 'rc:' .. id, m)
  end
  if redis.call('ZCARD', tk) == 0 then redis.call('ZREM', P .. 'rt', id) end
end
local ids = redis.call('ZRANGE', P .. 'rq', 0, -1)
local taken = 0
for _, id in ipairs(ids) do
  if taken >= limit then break end
  taken = taken + take_release(id, now)
end
return taken
";

/// ARGV: P, job id (empty: every job's). Returns per queued release: job id,
/// released at, upstream run (JSON), when its instant was alarmed (or empty).
pub(super) const RELEASES: &str = r"
local ids
if ARGV[2] ~= '' then ids = { ARGV[2] } else ids = redis.call('ZRANGE', P .. 'rq', 0, -1) end
local out = {}
for _, id in ipairs(ids) do
  local q = redis.call('ZRANGE', P .. 'rq:' .. id, 0, -1, 'WITHSCORES')
  for k = 1, #q, 2 do
    out[#out + 1] = id
    out[#out + 1] = q[k + 1]
    out[#out + 1] = redis.call('HGET', P .. 'rc:' .. id, q[k]) or ''
    out[#out + 1] = redis.call('HGET', P .. 'ra:' .. id, fire_of(q[k])) or ''
  end
end
return out
";

/// ARGV: P, job id, upstream instant (ms), the alarm event (JSON). When the job has
/// a release of that instant queued and the instant has no `waiting` mark: marks it
/// and puts the event in the outbox; returns 1 then, else 0.
pub(super) const ALARM_WAITING: &str = r"
local id, fire = ARGV[2], ARGV[3]
local ak = P .. 'ra:' .. id
if redis.call('HEXISTS', ak, fire) == 1 then return 0 end
local found = false
for _, m in ipairs(redis.call('ZRANGE', P .. 'rq:' .. id, 0, -1)) do
  if fire_of(m) == fire then found = true; break end
end
if not found then return 0 end
local nows = fmt(now_ms())
redis.call('HSET', ak, fire, nows)
enqueue(ARGV[4], nows)
return 1
";

/// ARGV: P, the audit entry (2-6), n, then per release: job, member, upstream run
/// (JSON). Queues each (as a finish does) and lets its job take one; appends the
/// audit entry.
pub(super) const QUEUE_RELEASES: &str = r"
local now = now_ms()
local nows = fmt(now)
local n = tonumber(ARGV[7])
for k = 8, 7 + 3 * n, 3 do queue_release(ARGV[k], ARGV[k + 1], ARGV[k + 2], nows) end
for k = 8, 7 + 3 * n, 3 do take_release(ARGV[k], now) end
audit(nows)
return 0
";

/// ARGV: P, the audit entry (2-6), job id, upstream instant. Removes the job's
/// queued releases of that instant; appends the audit entry when any was removed;
/// returns how many.
pub(super) const DROP_RELEASES: &str = r"
local id, fire = ARGV[7], ARGV[8]
local q, ck = P .. 'rq:' .. id, P .. 'rc:' .. id
local n = 0
for _, m in ipairs(redis.call('ZRANGE', q, 0, -1)) do
  local bar = string.find(m, '|', 1, true)
  if bar and string.sub(m, bar + 1) == fire then
    redis.call('ZREM', q, m)
    redis.call('HDEL', ck, m)
    n = n + 1
  end
end
redis.call('HDEL', P .. 'ra:' .. id, fire)
if redis.call('ZCARD', q) == 0 then redis.call('ZREM', P .. 'rq', id) end
if n > 0 then audit(fmt(now_ms())) end
return n
";

/// ARGV: P, the source shard's index, n, then per forward: its id on the source,
/// job, member, upstream run (JSON). Queues each release a finish on another shard
/// wrote for a job of this one (as a finish does) unless its id from that shard was
/// delivered already (`P fin:<source>`, kept a day), then lets each job take one;
/// returns how many were new.
pub(super) const ACCEPT_FORWARDS: &str = r"
local now = now_ms()
local nows = fmt(now)
local fin = P .. 'fin:' .. ARGV[2]
local n, new = tonumber(ARGV[3]), 0
for k = 4, 3 + 4 * n, 4 do
  if not redis.call('ZSCORE', fin, ARGV[k]) then
    redis.call('ZADD', fin, now, ARGV[k])
    queue_release(ARGV[k + 1], ARGV[k + 2], ARGV[k + 3], nows)
    new = new + 1
  end
end
for k = 4, 3 + 4 * n, 4 do take_release(ARGV[k + 1], now) end
redis.call('ZREMRANGEBYSCORE', fin, '-inf', '(' .. fmt(now - 86400000))
return new
";

/// A release's member in its job's queue: `<upstream job>|<key ms>` (the upstream
/// instant, or its window's start).
pub(super) fn member(r: &crate::dependency::Release) -> String {
    format!("{}|{}", r.from.job, r.from.key().as_millis())
}
