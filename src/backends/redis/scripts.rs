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
//! | `P job:<id>` | hash | `def` (JSON), `enabled`, `version`, `next`, `trigger`, `attempt`, `resume` (where the schedule resumes after a retry, or empty), `nctx` (the next fire's context as JSON, or empty; a hash written before it had `npayload`, the payload override alone), `token`, `running`, `lease_owner` and `lease_until` (ms; the job's lease when the scheduler keeps leases in the job hashes, see `lease_scripts`), `created`, `updated` |
//! | `P jobs` | sorted set | every job id (score 0, lexical order) |
//! | `P due` | sorted set | enabled, idle jobs with a next fire; score `next` |
//! | `P run:<id>` | hash | `job`, `fire`, `trigger`, `node`, `attempt`, `token`, `status`, `started`, `ended`, `error`, `retry`, `executor` (the executor instance of a remote run, or empty), `cfires` and `cthrough` (a misfire record's span, or empty), `ctx` (the context it ran with as JSON, or empty; before it, `payload`) |
//! | `P runs`, `P runs:job:<id>` | sorted sets | run ids (score = id), for the run log |
//! | `P running` | sorted set | runs in `running` state |
//! | `P ended` | sorted set | finished runs, score `started` (for purges) |
//! | `P lines:<run id>` | sorted set | a local run's log lines: each member is the offset and the line joined by a vertical bar, scored by the offset (deleted with the run) |
//! | `P stats:<day>`, `P stats:days` | hash, sorted set | run counts per status per UTC day number |
//! | `P node:<id>`, `P nodes` | hash, sorted set | node info and last beat (score) |
//! | `P executor:<m>`, `P executors` | hash, sorted set | an executor instance's `info`, `registered` and `beat`; members `m` are `<group length>:<group><address>`, scored by last beat |
//! | `P alarm:<id>`, `P alarms` | hash, sorted set | outbox events; all ids |
//! | `P alarms:ready`, `P alarms:sending` | sorted sets | claimable at (score), claim lapses at (score) |
//! | `P audit:<id>`, `P audit` | hash, sorted set | audit entries (`at`, `actor`, `action`, `target`, `before`, `after`); all ids (score = id) |
//! | `P cred:<kind>:<name>`, `P creds` | hash, sorted set | a runtime account or token (`body` JSON, `created_at`); members `<kind>:<name>` (score 0: listed in name order) |
//! | `P rq:<id>`, `P rc:<id>`, `P rq` | sorted set, hash, sorted set | releases queued for a job: members `<upstream job>\|<upstream fire>` scored by when they were written; each member's upstream run (JSON); the ids of jobs with a release queued (score 0) |
//! | `P ra:<id>` | hash | the upstream instants (ms) of a job's queued releases a `waiting` alarm was raised for, to when |
//! | `P rt:<id>`, `P rt` | sorted sets | the members a job that joins by a window took, scored by when (kept `rules::WINDOW_KEPT`, their `rc:` entries with them); the jobs with any |
//! | `P fwd` | hash | releases of jobs on other shards written by a finish, not yet delivered: id → JSON `[shard, job, member, upstream run]` |
//! | `P fin:<shard>` | sorted set | the ids of forwards from shard `<shard>` delivered here, scored by when (kept a day: a repeated delivery is ignored) |
//! | `P shard` | hash | `of` (the shard count) and `at` (this shard's index) when the keyspace is one shard of several |
//! | `P seq:run`, `P seq:alarm`, `P seq:audit`, `P seq:fwd`, `P schema` | strings | id sequences, schema version |

/// Shared helpers, prepended to every script.
const PRELUDE: &str = r#"
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
-- One variadic command per 4,000 arguments (Lua's unpack limit is about 8,000); an
-- even chunk keeps ZADD's score-member pairs together.
local function bulk(cmd, key, items)
  for s = 1, #items, 4000 do
    redis.call(cmd, key, unpack(items, s, math.min(s + 3999, #items)))
  end
end
local function day_of(ms) return fmt(math.floor(tonumber(ms) / 86400000)) end
-- The next id of sequence `name` (`run`, `alarm`, `audit`, `fwd`). A keyspace that is
-- one shard of n (`P shard`: `of` n, `at` its index s) issues ids from the clock,
-- `floor(ms * 2048 / n) * n + s`, strictly increasing and congruent to s mod n, so
-- the shard of an id is `id mod n` and ids of different shards order by time to
-- the millisecond (below 2^53 until the year 2109); an unsharded keyspace counts.
local shard_of = false
local function next_id(name)
  local k = P .. 'seq:' .. name
  if shard_of == false then
    local f = redis.call('HMGET', P .. 'shard', 'of', 'at')
    if f[1] then shard_of = { tonumber(f[1]), tonumber(f[2]) } else shard_of = nil end
  end
  if not shard_of then return fmt(redis.call('INCR', k)) end
  local n, s = shard_of[1], shard_of[2]
  local last = tonumber(redis.call('GET', k) or '-1')
  local id = math.floor(now_ms() * 2048 / n) * n + s
  if id <= last then id = last + n end
  id = fmt(id)
  redis.call('SET', k, id)
  return id
end
-- The audit entry in ARGV[2..6] (actor, action, target, before JSON, after JSON; an
-- empty actor: none), appended with the change it records.
local function audit(nows)
  if ARGV[2] == '' then return end
  local id = next_id('audit')
  redis.call('HSET', P .. 'audit:' .. id, 'at', nows, 'actor', ARGV[2], 'action', ARGV[3],
    'target', ARGV[4], 'before', ARGV[5], 'after', ARGV[6])
  redis.call('ZADD', P .. 'audit', id, id)
end
-- Records the run of a start (the run hash, the job's run index) and returns its id.
local function write_run(id, fire, trig, node, att, tok, cfires, cthrough, ctx, nows)
  local rid = next_id('run')
  redis.call('HSET', P .. 'run:' .. rid, 'job', id, 'fire', fire, 'trigger', trig,
    'node', node, 'attempt', att, 'token', tok, 'status', 'running', 'started', nows,
    'ended', '', 'error', '', 'retry', '0', 'cfires', cfires, 'cthrough', cthrough,
    'ctx', ctx)
  redis.call('ZADD', P .. 'runs:job:' .. id, rid, rid)
  return rid
end
-- Indexes a batch of started runs (`runs`: id, id, ...) of the jobs `started`: the run
-- log's and running indexes, the due index, the day's counter.
local function index_starts(runs, started, day)
  if #started == 0 then return end
  bulk('ZADD', P .. 'runs', runs)
  bulk('ZADD', P .. 'running', runs)
  bulk('ZREM', P .. 'due', started)
  redis.call('HINCRBY', P .. 'stats:' .. day, 'running', #started)
  redis.call('ZADD', P .. 'stats:days', day, day)
end
local function enqueue(ev, nows)
  local aid = next_id('alarm')
  redis.call('HSET', P .. 'alarm:' .. aid, 'event', ev, 'status', 'pending', 'attempts', '0',
    'next', nows, 'claimed_by', '', 'claim_until', '', 'last_error', '', 'created', nows)
  redis.call('ZADD', P .. 'alarms', aid, aid)
  redis.call('ZADD', P .. 'alarms:ready', nows, aid)
  return aid
end
"#;

/// The full source of a script: the prelude, the release helpers and its body.
pub(super) fn source(body: &str) -> String {
    format!("{PRELUDE}\n{}\n{body}", super::release_scripts::HELPERS)
}

/// ARGV: P, the audit entry (ARGV 2-6, see the prelude; empty for a batch), only if
/// absent (`1`/`0`), then per job: id, def, enabled (`1`/`0`), next, the first fire's
/// context (JSON, or empty). Returns per job,
/// in order, `created`, `updated`, `unchanged` or (only if absent, for an existing
/// job) `kept`. One call stores a whole batch atomically; the audit entry is appended
/// when a job was created or updated.
pub(super) const UPSERT: &str = r"
local absent_only = ARGV[7]
local now = now_ms()
local nows = fmt(now)
local out = {}
local changed = false
for i = 8, #ARGV, 5 do
  local id, def, en, nxt, ctx = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local jk = P .. 'job:' .. id
  local cur = redis.call('HGET', jk, 'def')
  if cur and absent_only == '1' then
    out[#out + 1] = 'kept'
  elseif cur == def then
    out[#out + 1] = 'unchanged'
  elseif cur then
    local back = requeue(id, nows)
    redis.call('HINCRBY', jk, 'version', 1)
    redis.call('HSET', jk, 'def', def, 'enabled', en, 'next', nxt, 'trigger', 'schedule',
      'attempt', '0', 'resume', '', 'nctx', ctx, 'updated', nows)
    reindex(id)
    if back then take_release(id, now) end
    out[#out + 1] = 'updated'
    changed = true
  else
    redis.call('HSET', jk, 'def', def, 'enabled', en, 'version', '1', 'next', nxt,
      'trigger', 'schedule', 'attempt', '0', 'resume', '', 'nctx', ctx, 'token', '0',
      'running', '', 'created', nows, 'updated', nows)
    redis.call('ZADD', P .. 'jobs', 0, id)
    reindex(id)
    out[#out + 1] = 'created'
    changed = true
  end
end
if changed then audit(nows) end
return out
";

/// ARGV: P, the audit entry (2-6), id. Returns 1 when the job existed (and then
/// appends the audit entry).
pub(super) const REMOVE: &str = r"
local id = ARGV[7]
redis.call('ZREM', P .. 'due', id)
redis.call('ZREM', P .. 'jobs', id)
redis.call('ZREM', P .. 'rq', id)
redis.call('ZREM', P .. 'rt', id)
redis.call('DEL', P .. 'rq:' .. id, P .. 'rc:' .. id, P .. 'ra:' .. id, P .. 'rt:' .. id)
local n = redis.call('DEL', P .. 'job:' .. id)
if n > 0 then audit(fmt(now_ms())) end
return n
";

/// ARGV: P, the audit entry (2-6), id, enabled, def, expected version, then on
/// resume the next fire: at, trigger, attempt, resume, context.
/// Returns -1 (no such job), 0 (version moved: read again) or 1 (done, audited).
pub(super) const SET_ENABLED: &str = r"
local id, en, def, ver = ARGV[7], ARGV[8], ARGV[9], ARGV[10]
local jk = P .. 'job:' .. id
local f = redis.call('HMGET', jk, 'version', 'enabled')
if not f[1] then return -1 end
if f[1] ~= ver then return 0 end
local now = now_ms()
local nows = fmt(now)
if f[2] ~= en then
  local back = requeue(id, nows) or en == '1'
  redis.call('HINCRBY', jk, 'version', 1)
  redis.call('HSET', jk, 'def', def, 'enabled', en, 'updated', nows)
  if en == '0' and redis.call('HGET', jk, 'trigger') == 'upstream' then
    -- A paused job holds no taken release (see rules::returns_release).
    redis.call('HSET', jk, 'next', '', 'trigger', 'schedule', 'attempt', '0', 'resume', '',
      'nctx', '')
  end
  if en == '1' then
    redis.call('HSET', jk, 'next', ARGV[11], 'trigger', ARGV[12], 'attempt', ARGV[13],
      'resume', ARGV[14], 'nctx', ARGV[15])
  end
  reindex(id)
  if back then take_release(id, now) end
end
audit(nows)
return 1
";

/// ARGV: P, the audit entry (2-6), id, then the fire: at, trigger, attempt, resume,
/// context (JSON, or empty). Returns 0 when the job does not exist (nothing written).
pub(super) const TRIGGER: &str = r"
local id = ARGV[7]
local jk = P .. 'job:' .. id
if redis.call('EXISTS', jk) == 0 then return 0 end
requeue(id, fmt(now_ms()))
redis.call('HSET', jk, 'next', ARGV[8], 'trigger', ARGV[9], 'attempt', ARGV[10],
  'resume', ARGV[11], 'nctx', ARGV[12])
reindex(id)
audit(fmt(now_ms()))
return 1
";

/// ARGV: P, until, limit[, after at, after id]. Returns id, next, def, version,
/// trigger, attempt, resume, context per fire, in due order; with the `after` key
/// only fires after it. A job whose lease in its hash (`lease_until`, see
/// `lease_scripts`) has not run out is passed over, and the page goes on past it
/// to `limit` fires. A job hash written before `nctx` existed gives its `npayload`
/// as a context.
/// The key's place is its rank in the due index: the member's own when it is still
/// there at that score, else that of the key added for a moment and taken out again
/// (or put back at its own score) at the end of the script, so no one sees it.
pub(super) const DUE: &str = r"
local key, limit, upto = P .. 'due', tonumber(ARGV[3]), tonumber(ARGV[2])
local rank, own, moved, after = 0, nil, false, nil
if ARGV[4] then
  local at = ARGV[4]
  after = ARGV[5]
  own = redis.call('ZSCORE', key, after)
  moved = not (own and tonumber(own) == tonumber(at))
  if moved then redis.call('ZADD', key, at, after) end
  rank = redis.call('ZRANK', key, after) + 1
end
local now = now_ms()
local out, n, done = {}, 0, false
while n < limit and not done do
  local page = redis.call('ZRANGE', key, rank, rank + limit - 1, 'WITHSCORES')
  rank = rank + limit
  done = #page < 2 * limit
  for k = 1, #page, 2 do
    if tonumber(page[k + 1]) > upto then done = true; break end
    local id = page[k]
    local f = redis.call('HMGET', P .. 'job:' .. id, 'next', 'def', 'version', 'trigger',
      'attempt', 'resume', 'nctx', 'npayload', 'lease_until')
    local leased = f[9] and f[9] ~= '' and tonumber(f[9]) > now
    if f[1] and f[2] and not leased then
      out[#out + 1] = id
      for j = 1, 5 do out[#out + 1] = f[j] end
      out[#out + 1] = f[6] or ''
      local ctx = f[7]
      if not ctx then
        ctx = ''
        -- the legacy payload as a context object (\034 is the double quote)
        if f[8] and f[8] ~= '' then ctx = '{\034payload\034:' .. f[8] .. '}' end
      end
      out[#out + 1] = ctx
      n = n + 1
      if n >= limit then break end
    end
  end
end
if moved then
  if own then redis.call('ZADD', key, own, after) else redis.call('ZREM', key, after) end
end
return out
";

/// ARGV: P, n, then per item: job, fire, version, token, node, attempt, trigger, covered
/// fires, covered through (both empty without a span), context (JSON, or empty).
/// Returns per item a triple: (`ok`, run id, started) or (refusal, current token, '');
/// a repeat of the start that recorded the job's running run in an earlier call
/// (same token, fire and attempt) gets that run's `ok` triple and writes nothing.
/// Per started run it writes the run hash, its job's run index, the job and the run-id
/// sequence; the shard's indexes and the day's counter are written once per batch.
pub(super) const START: &str = r"
local now = now_ms()
local nows, day = fmt(now), day_of(now)
local out = {}
local runs, running, undue, fresh = {}, {}, {}, {}
local i = 3
for _ = 1, tonumber(ARGV[2]) do
  local id, fire, ver, tok, node, att, trig, cfires, cthrough, ctx =
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6],
    ARGV[i + 7], ARGV[i + 8], ARGV[i + 9]
  i = i + 10
  local jk = P .. 'job:' .. id
  local f = redis.call('HMGET', jk, 'enabled', 'version', 'running', 'next', 'token')
  local code, cur, again = nil, '', nil
  if f[1] and f[3] and f[3] ~= '' and f[5] == tok and not fresh[f[3]] then
    -- A repeat of the start that recorded the running run: answer with that run.
    local r = redis.call('HMGET', P .. 'run:' .. f[3], 'status', 'job', 'token', 'fire', 'attempt', 'started')
    if r[1] == 'running' and r[2] == id and r[3] == tok and r[4] == fire and r[5] == att then
      again = r[6]
    end
  end
  if again then code = 'again'; cur = f[3]
  elseif not f[1] then code = 'not_found'
  elseif f[1] ~= '1' then code = 'disabled'
  elseif f[2] ~= ver then code = 'changed'
  elseif f[3] and f[3] ~= '' then code = 'running'
  elseif f[4] ~= fire then code = 'not_due'
  elseif tonumber(f[5]) > tonumber(tok) then code = 'fenced'; cur = f[5]
  end
  if again then
    out[#out + 1] = 'ok'; out[#out + 1] = cur; out[#out + 1] = again
  elseif code then
    out[#out + 1] = code; out[#out + 1] = cur; out[#out + 1] = ''
  else
    local rid = write_run(id, fire, trig, node, att, tok, cfires, cthrough, ctx, nows)
    redis.call('HSET', jk, 'token', tok, 'running', rid)
    runs[#runs + 1] = rid; runs[#runs + 1] = rid
    undue[#undue + 1] = id
    fresh[rid] = true
    out[#out + 1] = 'ok'; out[#out + 1] = rid; out[#out + 1] = nows
  end
end
index_starts(runs, undue, day)
return out
";

/// ARGV: P, n, then per item: run, job, token, takeover, status, has error, error,
/// will retry, version, next at, next trigger, next attempt, next resume, next context
/// (or empty), what happens to the job's lease in its hash (`0` untouched, `1` freed,
/// `2` kept) and for how long (ms, or empty), the executor instance (or empty), alarm count, alarm JSON…, release count, per release its job, member
/// and upstream run (JSON), forward count, per forward the shard of its job, the job,
/// member and upstream run (releases of jobs on other shards, kept in `P fwd` to be
/// delivered there, see `forward`).
/// Returns per item a triple: (`ok`, rescheduled, ended) or (refusal, current token, '').
/// Per finished run it reads the run and its job and writes each once; the due index,
/// the running and ended indexes and the day counters are written once per batch (the
/// due index with the last decision per job, as if written item by item).
pub(super) const FINISH: &str = r"
local now = now_ms()
local nows = fmt(now)
local out = {}
local ended, unrunning, due_of, counts = {}, {}, {}, {}
local releases, finished = {}, {}
local i = 3
for _ = 1, tonumber(ARGV[2]) do
  local rid, jid, tok, takeover, st, has_err, err, retry, ver, nat, ntrig, natt, nres, nctx, na =
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6],
    ARGV[i + 7], ARGV[i + 8], ARGV[i + 9], ARGV[i + 10], ARGV[i + 11], ARGV[i + 12],
    ARGV[i + 13], tonumber(ARGV[i + 17])
  local lease, lease_ms, executor = ARGV[i + 14], ARGV[i + 15], ARGV[i + 16]
  local alarms_at = i + 18
  local nr = tonumber(ARGV[alarms_at + na])
  local rel_at = alarms_at + na + 1
  local nf = tonumber(ARGV[rel_at + 3 * nr])
  local fwd_at = rel_at + 3 * nr + 1
  i = fwd_at + 4 * nf
  local rk = P .. 'run:' .. rid
  local r = redis.call('HMGET', rk, 'status', 'token', 'fire', 'job', 'started')
  if not r[1] then
    out[#out + 1] = 'not_found'; out[#out + 1] = ''; out[#out + 1] = ''
  elseif r[1] ~= 'running' then
    out[#out + 1] = 'not_running'; out[#out + 1] = ''; out[#out + 1] = ''
  else
    local jk = P .. 'job:' .. jid
    local jf = redis.call('HMGET', jk, 'token', 'running', 'version', 'next', 'enabled')
    local current = r[2]
    if jf[1] then current = jf[1] end
    local t, c, rt = tonumber(tok), tonumber(current), tonumber(r[2])
    local ok
    if takeover == '1' then ok = t >= c and t >= rt else ok = t == rt and t >= c end
    if not ok or r[4] ~= jid then
      out[#out + 1] = 'fenced'; out[#out + 1] = current; out[#out + 1] = ''
    else
      local resched = '0'
      if jf[1] then
        local running, nxt = jf[2] or '', jf[4]
        if running == rid then running = '' end
        local set = { 'token', tok, 'running', running }
        if jf[3] == ver and nxt == r[3] then
          nxt = nat
          resched = '1'
          for _, v in ipairs({ 'next', nat, 'trigger', ntrig, 'attempt', natt, 'resume', nres,
            'nctx', nctx }) do set[#set + 1] = v end
        end
        if lease == '1' then
          set[#set + 1] = 'lease_owner'; set[#set + 1] = ''
          set[#set + 1] = 'lease_until'; set[#set + 1] = '0'
        elseif lease == '2' then
          set[#set + 1] = 'lease_until'; set[#set + 1] = fmt(now + tonumber(lease_ms))
        end
        redis.call('HSET', jk, unpack(set))
        if jf[5] == '1' and nxt and nxt ~= '' and running == '' then
          due_of[jid] = nxt
        else
          due_of[jid] = false
        end
      end
      local e = ''
      if has_err == '1' then e = err end
      redis.call('HSET', rk, 'status', st, 'ended', nows, 'error', e, 'has_error', has_err,
        'retry', retry, 'executor', executor)
      unrunning[#unrunning + 1] = rid
      ended[#ended + 1] = r[5]; ended[#ended + 1] = rid
      local day = day_of(r[5])
      local c = counts[day] or {}
      counts[day] = c
      c.running = (c.running or 0) - 1
      c[st] = (c[st] or 0) + 1
      for k = alarms_at, alarms_at + na - 1 do enqueue(ARGV[k], nows) end
      for k = rel_at, rel_at + 3 * nr - 1, 3 do
        releases[#releases + 1] = { ARGV[k], ARGV[k + 1], ARGV[k + 2] }
      end
      for k = fwd_at, fwd_at + 4 * nf - 1, 4 do
        redis.call('HSET', P .. 'fwd', next_id('fwd'),
          cjson.encode({ ARGV[k], ARGV[k + 1], ARGV[k + 2], ARGV[k + 3] }))
      end
      finished[#finished + 1] = jid
      out[#out + 1] = 'ok'; out[#out + 1] = resched; out[#out + 1] = nows
    end
  end
end
local add, rem = {}, {}
for jid, at in pairs(due_of) do
  if at then add[#add + 1] = at; add[#add + 1] = jid else rem[#rem + 1] = jid end
end
bulk('ZADD', P .. 'due', add)
bulk('ZREM', P .. 'due', rem)
bulk('ZREM', P .. 'running', unrunning)
bulk('ZADD', P .. 'ended', ended)
for day, c in pairs(counts) do
  for field, n in pairs(c) do
    if n ~= 0 then redis.call('HINCRBY', P .. 'stats:' .. day, field, n) end
  end
end
for _, r in ipairs(releases) do queue_release(r[1], r[2], r[3], nows) end
for _, r in ipairs(releases) do take_release(r[1], now) end
for _, jid in ipairs(finished) do take_release(jid, now) end
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
  redis.call('DEL', rk, P .. 'lines:' .. rid)
  redis.call('ZREM', P .. 'runs', rid)
  redis.call('ZREM', P .. 'ended', rid)
end
return #ids
";

/// ARGV: P, run id, offset of the first line, the lines. Adds each line at its
/// offset unless one is stored there.
pub(super) const APPEND_LINES: &str = r"
local k = P .. 'lines:' .. ARGV[2]
local first = tonumber(ARGV[3])
for i = 4, #ARGV do
  local off = fmt(first + i - 4)
  if redis.call('ZCOUNT', k, off, off) == 0 then
    redis.call('ZADD', k, off, off .. '|' .. ARGV[i])
  end
end
return 0
";
