//! The scripts of the Redis store's job leases
//! ([`JobLeases`](crate::store::JobLeases)): each job's lease in its hash
//! (`lease_owner`, `lease_until` in ms; the token is the hash's `token`), so a claim
//! and its start are one script, and a finish frees or keeps the lease in its own.
//! A grant's token is `max(token + 1, TIME in µs)`, written back as the job's token.

/// ARGV: P, want, n, then per claim: job, fire, version, node, attempt, trigger,
/// covered fires, covered through (or empty), context (JSON or empty), ttl (ms).
/// Returns per claim a quintuple: (`ok`, run id, started, token, lease until) or
/// (refusal or `left`, '', '', '', ''). In order: the job exists, is enabled, has the
/// claim's version, runs nothing, is due at the claim's fire, its lease is free; then
/// up to `want` are claimed, the rest `left`. A claimed fire's run is written as the
/// start script writes one (`write_run`, `index_starts`), and its lease granted in
/// the job's hash.
pub(super) const CLAIM: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nows, day = fmt(now), day_of(now)
local want = tonumber(ARGV[2])
local out = {}
local runs, undue = {}, {}
local claimed = 0
local i = 4
for _ = 1, tonumber(ARGV[3]) do
  local id, fire, ver, node, att, trig, cfires, cthrough, ctx, ttl =
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6],
    ARGV[i + 7], ARGV[i + 8], ARGV[i + 9]
  i = i + 10
  local jk = P .. 'job:' .. id
  local f = redis.call('HMGET', jk, 'enabled', 'version', 'running', 'next', 'token', 'lease_until')
  local code = nil
  if not f[1] then code = 'not_found'
  elseif f[1] ~= '1' then code = 'disabled'
  elseif f[2] ~= ver then code = 'changed'
  elseif f[3] and f[3] ~= '' then code = 'running'
  elseif f[4] ~= fire then code = 'not_due'
  elseif f[6] and f[6] ~= '' and tonumber(f[6]) > now then code = 'held'
  elseif claimed >= want then code = 'left'
  end
  if code then
    out[#out + 1] = code; out[#out + 1] = ''; out[#out + 1] = ''; out[#out + 1] = ''
    out[#out + 1] = ''
  else
    claimed = claimed + 1
    local tok = fmt(math.max(tonumber(f[5] or '0') + 1, now_us))
    local lease_until = fmt(now + tonumber(ttl))
    local rid = write_run(id, fire, trig, node, att, tok, cfires, cthrough, ctx, nows)
    redis.call('HSET', jk, 'token', tok, 'running', rid, 'lease_owner', node,
      'lease_until', lease_until)
    runs[#runs + 1] = rid; runs[#runs + 1] = rid
    undue[#undue + 1] = id
    out[#out + 1] = 'ok'; out[#out + 1] = rid; out[#out + 1] = nows; out[#out + 1] = tok
    out[#out + 1] = lease_until
  end
end
index_starts(runs, undue, day)
return out
";

/// ARGV: P, owner, n, then per request: job, ttl (ms). Returns per request a triple:
/// (`ok`, token, lease until) for a grant, (`held`, '', '') otherwise. A job whose
/// lease is free (or expired) is granted to `owner` under a new token, which becomes
/// its token; a job that does not exist is granted with the clock's token and
/// excludes nothing.
pub(super) const ACQUIRE_JOBS: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local owner = ARGV[2]
local out = {}
local i = 4
for _ = 1, tonumber(ARGV[3]) do
  local id, ttl = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  local jk = P .. 'job:' .. id
  local f = redis.call('HMGET', jk, 'token', 'lease_until')
  local lease_until = fmt(now + ttl)
  if not f[1] then
    out[#out + 1] = 'ok'; out[#out + 1] = fmt(now_us); out[#out + 1] = lease_until
  elseif f[2] and f[2] ~= '' and tonumber(f[2]) > now then
    out[#out + 1] = 'held'; out[#out + 1] = ''; out[#out + 1] = ''
  else
    local tok = fmt(math.max(tonumber(f[1]) + 1, now_us))
    redis.call('HSET', jk, 'token', tok, 'lease_owner', owner, 'lease_until', lease_until)
    out[#out + 1] = 'ok'; out[#out + 1] = tok; out[#out + 1] = lease_until
  end
end
return out
";

/// ARGV: P, ttl (ms; empty: release), n, then per lease: job, owner, token. Returns
/// per lease its new expiry (a renewal), `ok` (a release), or '' when the lease was
/// not held by that owner with that token (a renewal also when it had expired). A
/// lease on a job that does not exist is renewed (it excludes nothing: a removed
/// job's run goes on) and released.
pub(super) const RENEW_OR_RELEASE_JOBS: &str = r"
local now = now_ms()
local ttl = ARGV[2]
local out = {}
local i = 4
for _ = 1, tonumber(ARGV[3]) do
  local id, owner, tok = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  i = i + 3
  local jk = P .. 'job:' .. id
  local f = redis.call('HMGET', jk, 'token', 'lease_owner', 'lease_until')
  local held = f[1] == tok and f[2] == owner
  if ttl ~= '' then
    local lease_until = fmt(now + tonumber(ttl))
    if not f[1] then
      out[#out + 1] = lease_until
    elseif held and f[3] and f[3] ~= '' and tonumber(f[3]) > now then
      redis.call('HSET', jk, 'lease_until', lease_until)
      out[#out + 1] = lease_until
    else
      out[#out + 1] = ''
    end
  elseif not f[1] then
    out[#out + 1] = 'ok'
  elseif held then
    redis.call('HSET', jk, 'lease_owner', '', 'lease_until', '0')
    out[#out + 1] = 'ok'
  else
    out[#out + 1] = ''
  end
end
return out
";
