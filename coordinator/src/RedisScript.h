// The Lua script that holds the whole redis-side policy. One script, dispatched on
// ARGV[1], so a client loads one SHA and every operation is one EVALSHA.
//
// Keys (all in the hash slot of "{<target>}", so Redis Cluster accepts the script):
//   KEYS[1]  threshold  string: the cap; absent = no cap
//   KEYS[2]  state      hash: m, p (slots held by MT/PT), maxseen
//   KEYS[3]  holders    hash: holder id -> "cls|lead"
//   KEYS[4]  ptlead     zset: PT holder id scored by lead (victim choice)
//   KEYS[5]  yield      set: PT holders already asked to yield
//   KEYS[6]  qmt        list: waiting MT ids, arrival order
//   KEYS[7]  qpt        list: waiting PT ids, arrival order
//   KEYS[8]  waiting    hash: waiter id -> "cls|lead|throttle"
//   KEYS[9]  procs      zset: process id scored by lease deadline (server ms)
//   KEYS[10] procinfo   hash: process id -> "host|pid"
// ARGV[2] is the key prefix "ppios:{<target>}:" for two per-id lists built from it:
//   <prefix>w:<id>      a waiter's wake-up list: the grant is pushed there (BLPOP)
//   <prefix>ctl:<proc>  a process's yield requests (its helper thread BLPOPs it)
// Ids are "<process id>#<n>", so the owning process of any id is the part before '#'.
#pragma once

namespace ppios {

inline constexpr const char *kRedisScript = R"LUA(
local op, prefix = ARGV[1], ARGV[2]
local K_THR, K_STATE, K_HOLD, K_PTLEAD, K_YIELD, K_QMT, K_QPT, K_WAIT, K_PROCS, K_INFO =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]

-- The server's clock only, and only when a lease is involved (the fast paths skip it).
local now = nil
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end

local function owner(id) return string.match(id, '^(.*)#') end
local function split(s)
  local out = {}
  for part in string.gmatch(s, '[^|]+') do out[#out + 1] = part end
  return out
end

local thr = tonumber(redis.call('GET', K_THR) or '-1')
local st = redis.call('HMGET', K_STATE, 'm', 'p', 'maxseen')
local m, p, seen = tonumber(st[1] or '0'), tonumber(st[2] or '0'), tonumber(st[3] or '0')

local function mt_grantable(throttle)
  if thr < 0 or m + p < thr then return true end
  return throttle == '0' and p == 0
end
local function pt_grantable() return thr < 0 or m + p < thr end

local function grant(id, cls, lead)
  redis.call('HSET', K_HOLD, id, cls .. '|' .. lead)
  if cls == 'M' then
    m = m + 1
    redis.call('HINCRBY', K_STATE, 'm', 1)
  else
    p = p + 1
    redis.call('HINCRBY', K_STATE, 'p', 1)
    redis.call('ZADD', K_PTLEAD, tonumber(lead), id)
  end
  if m + p > seen then
    seen = m + p
    redis.call('HSET', K_STATE, 'maxseen', seen)
  end
end

-- cls is given by the caller when it knows it (release), saving a lookup.
local function free_holder(id, cls)
  if not cls then
    local v = redis.call('HGET', K_HOLD, id)
    if not v then return false end
    cls = string.sub(v, 1, 1)
  end
  if redis.call('HDEL', K_HOLD, id) == 0 then return false end
  if cls == 'M' then
    m = m - 1
    redis.call('HINCRBY', K_STATE, 'm', -1)
  else
    p = p - 1
    redis.call('HINCRBY', K_STATE, 'p', -1)
    redis.call('ZREM', K_PTLEAD, id)
    redis.call('SREM', K_YIELD, id)
  end
  return true
end

-- The grant travels in the waiter's own list, pushed in the same script that freed the
-- slot, so a waiter that is not blocked yet still finds it.
local function hand_over(id, cls, lead)
  redis.call('HDEL', K_WAIT, id)
  grant(id, cls, lead)
  local wl = prefix .. 'w:' .. id
  redis.call('RPUSH', wl, '1')
  redis.call('PEXPIRE', wl, 60000)
end

-- Enough PT holders are asked to yield that every waiting MT can run: a PT of the
-- waiting MT's own process first, otherwise the one furthest ahead of its MT.
local function request_yields()
  if p == 0 or thr < 0 then return end
  local qm = redis.call('LLEN', K_QMT)
  if qm == 0 then return end
  local need = math.min(m + p - thr + qm, p)
  local flagged = redis.call('SCARD', K_YIELD)
  if flagged >= need then return end
  local pts = redis.call('ZREVRANGE', K_PTLEAD, 0, -1)
  local mts = redis.call('LRANGE', K_QMT, flagged, -1)
  for _, w in ipairs(mts) do
    if flagged >= need then break end
    local mine = owner(w)
    local victim = nil
    for _, h in ipairs(pts) do
      if redis.call('SISMEMBER', K_YIELD, h) == 0 then
        if owner(h) == mine then victim = h; break end
        if not victim then victim = h end
      end
    end
    if not victim then break end
    redis.call('SADD', K_YIELD, victim)
    local cl = prefix .. 'ctl:' .. owner(victim)
    redis.call('RPUSH', cl, victim)
    redis.call('PEXPIRE', cl, 60000)
    flagged = flagged + 1
  end
end

-- Hands free slots to waiters: MTs first in arrival order, PTs only while no MT waits.
local function promote()
  local qm, qp = redis.call('LLEN', K_QMT), redis.call('LLEN', K_QPT)
  if qm + qp == 0 then return end
  local mt_left = 0
  for _, w in ipairs(redis.call('LRANGE', K_QMT, 0, -1)) do
    local info = split(redis.call('HGET', K_WAIT, w) or 'M|0|0')
    if mt_grantable(info[3]) then
      redis.call('LREM', K_QMT, 1, w)
      hand_over(w, 'M', 0)
    else
      mt_left = mt_left + 1
    end
  end
  if mt_left == 0 then
    while pt_grantable() do
      local w = redis.call('LPOP', K_QPT)
      if not w then break end
      local info = split(redis.call('HGET', K_WAIT, w) or 'P|0|0')
      hand_over(w, 'P', info[2])
    end
  end
  request_yields()
end

local function drop_process(proc)
  local hs = redis.call('HKEYS', K_HOLD)
  for _, h in ipairs(hs) do
    if owner(h) == proc then free_holder(h) end
  end
  local ws = redis.call('HGETALL', K_WAIT)
  for i = 1, #ws, 2 do
    local w = ws[i]
    if owner(w) == proc then
      redis.call('HDEL', K_WAIT, w)
      if string.sub(ws[i + 1], 1, 1) == 'M' then redis.call('LREM', K_QMT, 1, w)
      else redis.call('LREM', K_QPT, 1, w) end
    end
  end
  redis.call('ZREM', K_PROCS, proc)
  redis.call('HDEL', K_INFO, proc)
  redis.call('DEL', prefix .. 'ctl:' .. proc)
end

-- Processes whose lease ran out give back their slots and queue places.
local function reap()
  local dead = redis.call('ZRANGEBYSCORE', K_PROCS, '-inf', clock(), 'LIMIT', 0, 16)
  for _, proc in ipairs(dead) do drop_process(proc) end
  return #dead > 0
end

local function register(proc, lease, hostpid)
  local added = redis.call('ZADD', K_PROCS, clock() + tonumber(lease), proc)
  redis.call('HSET', K_INFO, proc, hostpid)
  return added
end

if op == 'acquire' then
  -- ARGV: proc lease hostpid id cls(M|P) lead throttle(0|1)
  local proc, id, cls, lead, throttle = ARGV[3], ARGV[6], ARGV[7], ARGV[8], ARGV[9]
  -- A holder must always belong to a leased process, or a crash would leak its slot.
  if not redis.call('ZSCORE', K_PROCS, proc) then register(proc, ARGV[4], ARGV[5]) end
  local function grantable()
    if cls == 'M' then return mt_grantable(throttle) end
    return pt_grantable() and redis.call('LLEN', K_QMT) == 0 and redis.call('LLEN', K_QPT) == 0
  end
  -- Dead holders are only looked for when they could be what stands in the way.
  if not grantable() and reap() then promote() end
  if grantable() then
    grant(id, cls, cls == 'M' and 0 or lead)
    return 1
  end
  redis.call('HSET', K_WAIT, id, cls .. '|' .. lead .. '|' .. throttle)
  if cls == 'M' then redis.call('RPUSH', K_QMT, id) else redis.call('RPUSH', K_QPT, id) end
  request_yields()
  return 0
elseif op == 'check' then
  -- ARGV: id. 1 granted, 0 still waiting, -1 lost (reaped or reset: acquire again)
  local id = ARGV[3]
  local function granted()
    if redis.call('HEXISTS', K_HOLD, id) == 1 then
      redis.call('DEL', prefix .. 'w:' .. id)
      return true
    end
    return false
  end
  if granted() then return 1 end
  if redis.call('HEXISTS', K_WAIT, id) == 0 then return -1 end
  if reap() then promote() else request_yields() end
  if granted() then return 1 end
  if redis.call('HEXISTS', K_WAIT, id) == 0 then return -1 end
  return 0
elseif op == 'release' then
  -- ARGV: id cls. Idempotent: an unknown id (released, reaped, reset) is a no-op.
  if not free_holder(ARGV[3], ARGV[4]) then return 0 end
  promote()
  return 1
elseif op == 'renew' then
  -- ARGV: proc lease hostpid. Returns 1 when the process had lost its lease.
  if reap() then promote() end
  return register(ARGV[3], ARGV[4], ARGV[5])
elseif op == 'unregister' then
  drop_process(ARGV[3])
  promote()
  return 1
elseif op == 'adopt' then
  -- ARGV: wanted (-1: none). Stores it if no threshold is stored; returns the stored one.
  local wanted = tonumber(ARGV[3])
  if thr < 0 and wanted >= 0 then
    redis.call('SET', K_THR, wanted)
    thr = wanted
    promote()
  end
  return thr
elseif op == 'set-threshold' then
  local n = tonumber(ARGV[3])
  if n < 0 then redis.call('DEL', K_THR) else redis.call('SET', K_THR, n) end
  thr = n < 0 and -1 or n
  promote()
  return thr
elseif op == 'status' then
  if reap() then promote() end
  local out = {thr, m, p, redis.call('LLEN', K_QMT), redis.call('LLEN', K_QPT),
               redis.call('ZCARD', K_PROCS), seen}
  local hs = redis.call('HGETALL', K_HOLD)
  for i = 1, #hs, 2 do
    local proc = owner(hs[i])
    out[#out + 1] = hs[i + 1]
    out[#out + 1] = redis.call('HGET', K_INFO, proc) or '?|0'
    out[#out + 1] = redis.call('SISMEMBER', K_YIELD, hs[i])
  end
  return out
elseif op == 'reset' then
  redis.call('DEL', K_THR, K_STATE, K_HOLD, K_PTLEAD, K_YIELD, K_QMT, K_QPT, K_WAIT, K_PROCS, K_INFO)
  return 1
end
return redis.error_reply('ppios: unknown coordinator operation ' .. tostring(op))
)LUA";

}  // namespace ppios
