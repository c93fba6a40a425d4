//! The Lua scripts Redis runs atomically for shared state: client admission (token buckets and
//! budgets), spending, concurrency leases, provider quota counts, and raising a budget floor.

pub(super) const ADMIT: &str = r#"
local now = tonumber(ARGV[1])
local rpm = tonumber(ARGV[2])
local tpm = tonumber(ARGV[3])
local dt = tonumber(redis.call('HGET', KEYS[3], 't') or '0')
local du = tonumber(redis.call('HGET', KEYS[3], 'u') or '0')
local mt = tonumber(redis.call('HGET', KEYS[4], 't') or '0')
local mu = tonumber(redis.call('HGET', KEYS[4], 'u') or '0')
local function over(limit, used) return limit > 0 and used >= limit end
if over(tonumber(ARGV[4]), dt) or over(tonumber(ARGV[5]), du)
  or over(tonumber(ARGV[6]), mt) or over(tonumber(ARGV[7]), mu) then
  return {3, 0, dt, du, mt, mu}
end
-- Requests asked for at once (permits.rs): more than one only while every budget is less than
-- half used, and never more than 1 % of the requests per minute.
local n = math.max(1, math.floor(tonumber(ARGV[8] or '1')))
local function half(limit, used) return limit > 0 and used * 2 >= limit end
if half(tonumber(ARGV[4]), dt) or half(tonumber(ARGV[5]), du)
  or half(tonumber(ARGV[6]), mt) or half(tonumber(ARGV[7]), mu) then n = 1 end
if rpm > 0 then n = math.min(n, math.max(1, math.floor(rpm / 100))) end
local function level(key, rate)
  local l = tonumber(redis.call('HGET', key, 'l') or tostring(rate))
  local at = tonumber(redis.call('HGET', key, 'a') or tostring(now))
  if now > at then l = math.min(rate, l + (now - at) * rate / 60000) end
  return l
end
local tl, rl = -1, -1
if tpm > 0 then
  local l = level(KEYS[2], tpm)
  redis.call('HSET', KEYS[2], 'l', tostring(l), 'a', tostring(now))
  redis.call('PEXPIRE', KEYS[2], 120000)
  if l <= 0 then return {2, math.ceil((1 - l) * 60000 / tpm), dt, du, mt, mu} end
  if l * 2 < tpm then n = 1 end
  tl = math.floor(l * 1000)
end
if rpm > 0 then
  local l = level(KEYS[1], rpm)
  if l < 1 then
    redis.call('HSET', KEYS[1], 'l', tostring(l), 'a', tostring(now))
    return {1, math.ceil((1 - l) * 60000 / rpm), dt, du, mt, mu}
  end
  n = math.min(n, math.floor(l))
  redis.call('HSET', KEYS[1], 'l', tostring(l - n), 'a', tostring(now))
  redis.call('PEXPIRE', KEYS[1], 120000)
  rl = math.floor((l - n) * 1000)
end
-- What is left (in thousandths; -1: no such limit), for the client's rate-limit headers, and
-- how many requests were granted.
return {0, 0, dt, du, mt, mu, rl, tl, n}
"#;

pub(super) const SPEND: &str = r#"
if not redis.call('SET', KEYS[4], '1', 'NX', 'PX', ARGV[7]) then return 0 end
local now = tonumber(ARGV[1])
local tpm = tonumber(ARGV[2])
local tokens = tonumber(ARGV[3])
if tpm > 0 then
  local l = tonumber(redis.call('HGET', KEYS[1], 'l') or tostring(tpm))
  local at = tonumber(redis.call('HGET', KEYS[1], 'a') or tostring(now))
  if now > at then l = math.min(tpm, l + (now - at) * tpm / 60000) end
  redis.call('HSET', KEYS[1], 'l', tostring(l - tokens), 'a', tostring(math.max(now, at)))
  redis.call('PEXPIRE', KEYS[1], 120000)
end
redis.call('HINCRBY', KEYS[2], 't', tokens)
redis.call('HINCRBY', KEYS[2], 'u', ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('HINCRBY', KEYS[3], 't', tokens)
redis.call('HINCRBY', KEYS[3], 'u', ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[6])
return 1
"#;

/// Up to ARGV[5] slots (at least one) while fewer than ARGV[2] are held: the first is ARGV[4],
/// the others ARGV[4] .. '.2', '.3' …; returns how many were granted.
pub(super) const LEASE: &str = r#"
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = math.min(tonumber(ARGV[2]) - redis.call('ZCARD', KEYS[1]), math.max(1, tonumber(ARGV[5] or '1')))
if n < 1 then return 0 end
for i = 1, n do
  local id = ARGV[4]
  if i > 1 then id = id .. '.' .. i end
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), id)
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return n
"#;

/// Counts requests (this minute, this quota day) and tokens (this minute) for one provider key.
pub(super) const QUOTA: &str = r#"
local m = redis.call('HINCRBY', KEYS[1], 'r', ARGV[1])
local t = redis.call('HINCRBY', KEYS[1], 't', ARGV[2])
redis.call('PEXPIRE', KEYS[1], 120000)
local d = redis.call('HINCRBY', KEYS[2], 'r', ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return {m, t, d}
"#;

/// Raises a budget hash to at least this instance's own view (after Redis lost data).
pub(super) const RAISE: &str = r#"
for i, f in ipairs({'t', 'u'}) do
  local cur = tonumber(redis.call('HGET', KEYS[1], f) or '0')
  if tonumber(ARGV[i]) > cur then redis.call('HSET', KEYS[1], f, ARGV[i]) end
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"#;

/// Folds a counter hash written under the old key layout into its new key(s) and deletes it:
/// KEYS[1] the old hash, KEYS[2..] the new ones, ARGV[1] a divisor (2 where one old hash was
/// both the day's and the month's and so counted everything twice), ARGV[2..] each new key's
/// expiry in ms. Running it twice is harmless: the second finds nothing to fold.
pub(super) const MIGRATE: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local div = tonumber(ARGV[1])
local flat = redis.call('HGETALL', KEYS[1])
for i = 2, #KEYS do
  for j = 1, #flat, 2 do
    local n = tonumber(flat[j + 1])
    if n and n > 0 then redis.call('HINCRBY', KEYS[i], flat[j], math.ceil(n / div)) end
  end
  redis.call('PEXPIRE', KEYS[i], ARGV[i])
end
redis.call('DEL', KEYS[1])
return 1
"#;
