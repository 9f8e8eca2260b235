//! The Lua scripts of a [`RedisStore`](super::RedisStore) shard beside those of its
//! jobs and runs: the node and executor registry, orphaned runs, the alarm outbox,
//! the audit log and the runtime credentials. Conventions and key layout as in
//! [`scripts`](super::scripts); each gets the same prelude.

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

/// ARGV: P, member, info. Registers or refreshes an executor instance (keeping its
/// first `registered`); returns the store's now.
pub(super) const EXECUTOR_BEAT: &str = r"
local now = now_ms()
local nows = fmt(now)
local key = P .. 'executor:' .. ARGV[2]
if redis.call('EXISTS', key) == 0 then redis.call('HSET', key, 'registered', nows) end
redis.call('HSET', key, 'info', ARGV[3], 'beat', nows)
redis.call('ZADD', P .. 'executors', now, ARGV[2])
return nows
";

/// ARGV: P, silent ms. Removes executor instances silent for longer; returns their
/// members.
pub(super) const REAP_EXECUTORS: &str = r"
local cutoff = now_ms() - tonumber(ARGV[2])
local ms = redis.call('ZRANGEBYSCORE', P .. 'executors', '-inf', '(' .. fmt(cutoff))
for _, m in ipairs(ms) do
  redis.call('DEL', P .. 'executor:' .. m)
  redis.call('ZREM', P .. 'executors', m)
end
return ms
";

/// ARGV: P, member. Returns 1 when the instance was registered.
pub(super) const DEREGISTER_EXECUTOR: &str = r"
redis.call('DEL', P .. 'executor:' .. ARGV[2])
return redis.call('ZREM', P .. 'executors', ARGV[2])
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

/// ARGV: P, limit, then the ids of the live nodes. Ids of running runs whose node
/// is not among them, oldest first (a shard's own: the nodes are registered on
/// shard 0).
pub(super) const ORPHANED_AMONG: &str = r"
local out = {}
local limit = tonumber(ARGV[2])
local live = {}
for k = 3, #ARGV do live[ARGV[k]] = true end
for _, rid in ipairs(redis.call('ZRANGE', P .. 'running', 0, -1)) do
  if #out >= limit then break end
  local node = redis.call('HGET', P .. 'run:' .. rid, 'node')
  if node and not live[node] then table.insert(out, rid) end
end
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

/// ARGV: P, after id, chunk, before ms. Looks at up to `chunk` events after `after`
/// (oldest first) and deletes those that are done (sent, not needed, or failed with no
/// retry) and were created before `before`. Returns `{deleted, last id looked at}`;
/// the last id is empty once the events run out or reach `before`.
pub(super) const PURGE_ALARMS: &str = r"
local before = tonumber(ARGV[4])
local ids = redis.call('ZRANGEBYSCORE', P .. 'alarms', '(' .. ARGV[2], '+inf', 'LIMIT', 0, tonumber(ARGV[3]))
local deleted, last = 0, ''
for _, id in ipairs(ids) do
  local ak = P .. 'alarm:' .. id
  local f = redis.call('HMGET', ak, 'status', 'next', 'created')
  if f[3] and tonumber(f[3]) >= before then return {deleted, ''} end
  local done = f[1] == 'sent' or f[1] == 'not_needed' or (f[1] == 'failed' and (not f[2] or f[2] == ''))
  if done or not f[1] then
    redis.call('DEL', ak)
    redis.call('ZREM', P .. 'alarms', id)
    deleted = deleted + 1
  end
  last = id
end
if #ids < tonumber(ARGV[3]) then last = '' end
return {deleted, last}
";

/// ARGV: P, the audit entry (2-6), id, `retry` or `discard`. An operator's change to
/// an event: a pending or failed one becomes pending, claimable now (retry), or
/// failed with no retry (discard). Returns 1 when it was one (and appends the audit
/// entry).
pub(super) const APPLY_ALARM: &str = r"
local id = ARGV[7]
local ak = P .. 'alarm:' .. id
local st = redis.call('HGET', ak, 'status')
if st ~= 'pending' and st ~= 'failed' then return 0 end
local now = fmt(now_ms())
if ARGV[8] == 'retry' then
  redis.call('HSET', ak, 'status', 'pending', 'next', now)
  redis.call('ZADD', P .. 'alarms:ready', now, id)
else
  redis.call('HSET', ak, 'status', 'failed', 'next', '')
  redis.call('ZREM', P .. 'alarms:ready', id)
end
audit(now)
return 1
";

/// ARGV: P, actor, action, target, before JSON, after JSON (empty when absent).
/// Appends an audit entry stamped with the server's clock.
pub(super) const APPEND_AUDIT: &str = r"
audit(fmt(now_ms()))
return 1
";

/// ARGV: P, chunk, before ms. Deletes up to `chunk` of the oldest entries appended
/// before `before`; returns how many (fewer than `chunk` once none is left).
pub(super) const PURGE_AUDIT: &str = r"
local before = tonumber(ARGV[3])
local ids = redis.call('ZRANGE', P .. 'audit', 0, tonumber(ARGV[2]) - 1)
local deleted = 0
for _, id in ipairs(ids) do
  local at = redis.call('HGET', P .. 'audit:' .. id, 'at')
  if at and tonumber(at) >= before then return deleted end
  redis.call('DEL', P .. 'audit:' .. id)
  redis.call('ZREM', P .. 'audit', id)
  deleted = deleted + 1
end
return deleted
";

/// ARGV: P, the audit entry (2-6), kind, name, body JSON. Stores the credential
/// unless one of its kind and name is stored; returns 1 when it did (and appends the
/// audit entry), 0 otherwise.
pub(super) const ADD_CREDENTIAL: &str = r"
local member = ARGV[7] .. ':' .. ARGV[8]
local k = P .. 'cred:' .. member
if redis.call('EXISTS', k) == 1 then return 0 end
local now = fmt(now_ms())
redis.call('HSET', k, 'body', ARGV[9], 'created_at', now)
redis.call('ZADD', P .. 'creds', 0, member)
audit(now)
return 1
";

/// ARGV: P, the audit entry (2-6), kind, name. Removes the credential; returns 1
/// when there was one (and appends the audit entry), 0 otherwise.
pub(super) const REMOVE_CREDENTIAL: &str = r"
local member = ARGV[7] .. ':' .. ARGV[8]
if redis.call('DEL', P .. 'cred:' .. member) == 0 then return 0 end
redis.call('ZREM', P .. 'creds', member)
audit(fmt(now_ms()))
return 1
";
