// The Lua script that holds the whole redis-side policy. One script, dispatched on
// ARGV[1], so a client loads one SHA and every operation is one EVALSHA.
//
// Cost model (redis-server 7.0 on the project machines, see the coordinator note): the
// EVALSHA itself costs ~1 us, every argument ~0.08 us, every redis.call ~0.2-0.3 us,
// every Lua closure created ~0.05 us. Redis runs one script at a time, so the server time
// of acquire + release bounds the pairs per second of the whole system. Hence:
//   - acquire and release have O(1) fast paths (nobody waits, the cap has room): one HMGET
//     of the counters, 2-3 calls, one HSET of the changed counters, no TIME, no scans;
//   - the counters (m, p, queue lengths, pending yield requests) live in one hash, read
//     once and written back once, instead of being recomputed with LLEN/SCARD;
//   - only one key is passed (the state hash, which fixes the hash slot); the others are
//     derived from its "ppios:{<target>}:" prefix, so they share its slot and Redis Cluster
//     accepts every call;
//   - helper functions for the slow paths are defined after the fast paths, so the fast
//     paths do not pay for creating their closures.
//
// Keys, all "ppios:{<target>}:<name>":
//   state     hash: n (the cap; absent = no cap), m, p (slots held by MT/PT), qm, qp
//             (lengths of qmt/qpt), y (size of yield), maxseen (most slots ever held at once),
//             g (slots handed to waiters so far: while it moves the queue moves, and a
//             waiter's wait is worth it; see RedisCoordinator's bounded wait), ep (the
//             state's epoch, "<s>.<us>" of the server's clock when it was made: a client
//             that finds another one, or none, knows the state was lost under it), rend
//             (server ms: no new grant before, after a loss; see recovering())
//   holders   hash: holder id -> "<cls>|<lead>" (cls M or P)
//   yield     set: PT holders already asked to yield
//   qmt, qpt  lists: waiting MTs / PTs in arrival order, entries "<id>|<lead>|<throttle>"
//             (throttle: what an MT does at a full cap, ppios::MtAtCap: 0 pass, 1 wait,
//             L wait while the state field hold is 1)
//   procs     zset: process id scored by lease deadline (server ms)
//   procinfo  hash: process id -> "host|pid"
//   w:<id>    a waiter's wake-up list: the grant is pushed there (BLPOP)
//   ctl:<proc> a process's yield requests (its helper thread BLPOPs it)
//   PPIOS_THRESHOLD=auto: state fields auto (1: learning on), hold (1: the controller holds
//   MTs of rule L at the cap; cleared whenever auto is) and bytes (completed bytes
//   reported at release); ctlr: the controller's process id, with the lease as its PX
//   expiry; curve: hash k -> MiB/s learned
//   Two-level backend (node+): nodes, hash node -> "share|need|mtneed|pt|lease deadline ms|
//   largest PT lead";
//   nw:<node> a node's wake-up list (its listener BLPOPs it; "g<k>": its PTs owe k more
//   slots, lower the cap now; "c<seq>:<k>": k slots were credited to its share, raise the
//   cap now); ngive, hash node -> slots its PTs owe to MTs waiting on another node; ncseq,
//   hash node -> sequence number of its last credit; nrecover: set for a lease after the
//   server lost its records
// Ids are "<process id>#<n>", so the owning process of any id is the part before '#'.
#pragma once

namespace ppios {

inline constexpr const char *kRedisScript = R"LUA(
local K_STATE, op = KEYS[1], ARGV[1]
local prefix = string.sub(K_STATE, 1, -6)  -- strip "state"
local K_HOLD, K_PROCS = prefix .. 'holders', prefix .. 'procs'

local st = redis.call('HMGET', K_STATE, 'n', 'm', 'p', 'qm', 'qp', 'y', 'maxseen', 'ep', 'rend')
-- Counts are never below zero, whatever is stored (a counter that drifted is corrected
-- by the next reap that recounts, and never makes a request queue forever).
local function count(v) return math.max(0, tonumber(v) or 0) end
-- The cap is a whole number from 1 to 1048576 (kMaxThreshold); anything else stored (0,
-- nan, inf, a fraction: a forgery or a bug) means none, as in a node-local segment: a
-- wrong cap, never a queue that no grant can ever leave.
local n = tonumber(st[1])
if not n or n ~= n or n < 1 or n > 1048576 or n ~= math.floor(n) then n = -1 end
local m, p = count(st[2]), count(st[3])
local qm, qp, y, seen = count(st[4]), count(st[5]), count(st[6]), count(st[7])
-- A client passes the epoch it saw (acquire, check, renew). A state that lost it (FLUSHALL,
-- eviction, a deleted state key while jobs ran) or has another one answers -2 and changes
-- nothing: the client rebuilds (RedisCoordinator: the epoch op, its cap stored again).
-- Otherwise the lost state would be an empty one: no cap, no holders, every access granted.
local seen_epoch = (op == 'acquire' and ARGV[9]) or (op == 'check' and ARGV[6]) or (op == 'renew' and ARGV[5]) or
                   (op == 'node-sync' and ARGV[9]) or nil
if seen_epoch and seen_epoch ~= '' and st[8] ~= seen_epoch then return -2 end
local m0, p0, qm0, qp0, y0, seen0 = m, p, qm, qp, y, seen
local handed = 0  -- grants of this call outside the fast paths (state field g)

-- Writes back the counters that changed, in one call.
local function save()
  m, p, qm, qp, y = math.max(m, 0), math.max(p, 0), math.max(qm, 0), math.max(qp, 0), math.max(y, 0)
  if m + p > seen then seen = m + p end
  local a = {}
  if m ~= m0 then a[#a + 1] = 'm'; a[#a + 1] = m end
  if p ~= p0 then a[#a + 1] = 'p'; a[#a + 1] = p end
  if qm ~= qm0 then a[#a + 1] = 'qm'; a[#a + 1] = qm end
  if qp ~= qp0 then a[#a + 1] = 'qp'; a[#a + 1] = qp end
  if y ~= y0 then a[#a + 1] = 'y'; a[#a + 1] = y end
  if seen ~= seen0 then a[#a + 1] = 'maxseen'; a[#a + 1] = seen end
  if #a > 0 then redis.call('HSET', K_STATE, unpack(a)) end
  if handed > 0 then redis.call('HINCRBY', K_STATE, 'g', handed); handed = 0 end
end

-- Fast paths. They apply only when nobody waits, so no hand-over, yield request or reap
-- can be due; otherwise they change nothing and the general code below does the work.
if op == 'acquire' then
  -- ARGV: proc lease hostpid id cls(M|P) lead throttle(0|1|L)
  -- Room under the cap, nobody queued (MTs before PTs, PTs in order), and our lease is
  -- known: a holder must always belong to a leased process, or a crash would leak its slot.
  if qm + qp == 0 and not st[9] and (n < 0 or m + p < n) and redis.call('ZSCORE', K_PROCS, ARGV[2]) then
    local cls = ARGV[6]
    redis.call('HSET', K_HOLD, ARGV[5], cls .. '|' .. ARGV[7])
    if cls == 'M' then m = m + 1 else p = p + 1 end
    save()
    return 1
  end
elseif op == 'release' then
  -- ARGV: id cls bytes proc. Idempotent: an unknown id (released, reaped, reset) is a
  -- no-op, and so is a release by another process than the holder's or with another
  -- class than the grant's: it changes nothing (returns -1).
  local v = redis.call('HGET', K_HOLD, ARGV[2])
  if not v then return 0 end
  if string.sub(v, 1, 1) ~= ARGV[3] or string.match(ARGV[2], '^(.*)#') ~= ARGV[5] then return -1 end
  if qm + qp == 0 then
    redis.call('HDEL', K_HOLD, ARGV[2])
    if ARGV[4] and ARGV[4] ~= '0' then redis.call('HINCRBY', K_STATE, 'bytes', ARGV[4]) end
    if ARGV[3] == 'M' then
      m = m - 1
    else
      p = p - 1
      -- y counts the members of the yield set: when it is 0 there is nothing to remove.
      if y > 0 and redis.call('SREM', prefix .. 'yield', ARGV[2]) == 1 then y = y - 1 end
    end
    save()
    return 1
  end
end

-- General code: waiters, yield requests, leases, administration.
local K_YIELD, K_QMT, K_QPT, K_INFO = prefix .. 'yield', prefix .. 'qmt', prefix .. 'qpt', prefix .. 'procinfo'

-- The server's clock only, read at most once per call and only when a lease is involved.
local now = nil
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end

-- Entries no ppios process wrote (malformed) parse to nil: the code below skips them and
-- repair() drops them, so they never make a call fail.
local function owner(id) return id and string.match(id, '^(.+)#%d+$') or nil end
-- A queue entry carries what the grant needs, so no per-waiter hash is kept.
local function entry(id, lead, throttle) return id .. '|' .. lead .. '|' .. throttle end
local function parse_entry(e)
  local id, lead, throttle = string.match(e, '^(.*)|(%d+)|([01L])$')
  if id and owner(id) then return id, lead, throttle end
  return nil
end

-- After a loss of the state, nothing new is granted for one lease from the new epoch (field
-- rend): time for every live process to find the loss and come back, while the slots they
-- held across it are counted nowhere. Read once per call; cleared once over.
local in_recovery = nil
local function recovering()
  if in_recovery == nil then
    in_recovery = false
    if st[9] then
      if clock() < (tonumber(st[9]) or 0) then in_recovery = true else redis.call('HDEL', K_STATE, 'rend') end
    end
  end
  return in_recovery
end

local hold = nil  -- the state's hold field, read once per call and only when rule L needs it
local function mt_grantable(throttle)
  if recovering() then return false end
  if n < 0 or m + p < n then return true end
  if p > 0 then return false end
  if throttle == 'L' then
    if hold == nil then hold = redis.call('HGET', K_STATE, 'hold') == '1' end
    return not hold
  end
  return throttle == '0'
end
local function pt_grantable() return not recovering() and (n < 0 or m + p < n) end

-- Turns learning (PPIOS_THRESHOLD=auto) on. When it was off it starts over: MTs pass
-- until the controller holds them again.
local function learning_on()
  if not redis.call('HGET', K_STATE, 'auto') then redis.call('HDEL', K_STATE, 'hold') end
  redis.call('HSET', K_STATE, 'auto', 1)
end

local function grant(id, cls, lead)
  redis.call('HSET', K_HOLD, id, cls .. '|' .. lead)
  if cls == 'M' then m = m + 1 else p = p + 1 end
  handed = handed + 1
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
  else
    p = p - 1
    if y > 0 and redis.call('SREM', K_YIELD, id) == 1 then y = y - 1 end
  end
  return true
end

-- The grant travels in the waiter's own list, pushed in the same script that freed the
-- slot, so a waiter that is not blocked yet still finds it. The waiter's BLPOP (or its
-- "check") consumes the list; drop_process deletes it for a process that died first.
local function hand_over(id, cls, lead)
  grant(id, cls, lead)
  redis.call('RPUSH', prefix .. 'w:' .. id, '1')
end

-- Enough PT holders are asked to yield that every waiting MT can run: a PT of the
-- waiting MT's own process first, otherwise the one furthest ahead of its MT. O(1) unless
-- a request is due; then one pass over the holders (at most the cap plus the MTs).
local function request_yields()
  if p == 0 or n < 0 or qm == 0 then return end
  local need = math.min(m + p - n + qm, p)
  if y >= need then return end
  local asked = {}
  if y > 0 then for _, h in ipairs(redis.call('SMEMBERS', K_YIELD)) do asked[h] = true end end
  local cands = {}  -- PT holders not asked yet: {id, lead, owner}
  local hs = redis.call('HGETALL', K_HOLD)
  for i = 1, #hs, 2 do
    local h, v = hs[i], hs[i + 1]
    if string.sub(v, 1, 1) == 'P' and not asked[h] and owner(h) then
      cands[#cands + 1] = {h, tonumber(string.sub(v, 3)) or 0, owner(h)}
    end
  end
  for _, e in ipairs(redis.call('LRANGE', K_QMT, y, -1)) do
    if y >= need then break end
    local mine = owner(parse_entry(e))
    local own, any = nil, nil
    for i, c in ipairs(cands) do
      if c[3] == mine and (not own or c[2] > cands[own][2]) then own = i end
      if not any or c[2] > cands[any][2] then any = i end
    end
    local pick = own or any
    if not pick then break end
    local victim = cands[pick]
    table.remove(cands, pick)
    redis.call('SADD', K_YIELD, victim[1])
    y = y + 1
    local cl = prefix .. 'ctl:' .. victim[3]
    redis.call('RPUSH', cl, victim[1])
    redis.call('PEXPIRE', cl, 60000)
  end
end

-- Hands free slots to waiters: MTs first in arrival order, PTs only while no MT waits.
local function promote()
  if qm > 0 then
    for _, e in ipairs(redis.call('LRANGE', K_QMT, 0, -1)) do
      local id, _, throttle = parse_entry(e)
      if not id then
        redis.call('LREM', K_QMT, 1, e)  -- malformed: dropped
        qm = qm - 1
      elseif mt_grantable(throttle) then
        redis.call('LREM', K_QMT, 1, e)
        qm = qm - 1
        hand_over(id, 'M', '0')
      end
    end
  end
  while qm == 0 and qp > 0 and pt_grantable() do
    local e = redis.call('LPOP', K_QPT)
    if not e then qp = 0; break end
    qp = qp - 1
    local id, lead = parse_entry(e)
    if id then hand_over(id, 'P', lead) end  -- (a malformed entry is dropped)
  end
  request_yields()
end

local function drop_process(proc)
  local hs = redis.call('HGETALL', K_HOLD)
  for i = 1, #hs, 2 do
    local h = hs[i]
    if owner(h) == proc then
      free_holder(h, string.sub(hs[i + 1], 1, 1))
      redis.call('DEL', prefix .. 'w:' .. h)  -- a grant it never collected
    end
  end
  for _, q in ipairs({K_QMT, K_QPT}) do
    for _, e in ipairs(redis.call('LRANGE', q, 0, -1)) do
      if owner(parse_entry(e)) == proc then
        local removed = redis.call('LREM', q, 1, e)
        if q == K_QMT then qm = qm - removed else qp = qp - removed end
      end
    end
  end
  redis.call('ZREM', K_PROCS, proc)
  redis.call('HDEL', K_INFO, proc)
  redis.call('DEL', prefix .. 'ctl:' .. proc)
end

-- Processes whose lease ran out give back their slots and queue places. A deadline
-- further ahead than the longest lease (kMaxLeaseMs, one hour) and a minute was never set
-- by a client (a forged holder's process): it counts as run out too.
local function reap()
  local dead = redis.call('ZRANGEBYSCORE', K_PROCS, '-inf', clock(), 'LIMIT', 0, 16)
  for _, proc in ipairs(redis.call('ZRANGEBYSCORE', K_PROCS, '(' .. (clock() + 3660000), '+inf', 'LIMIT', 0, 16)) do
    dead[#dead + 1] = proc
  end
  for _, proc in ipairs(dead) do drop_process(proc) end
  return #dead > 0
end

-- Brings the target back to what ppios writes: keys of the wrong type are deleted, holders,
-- queue entries and yield members that do not parse or whose process is not registered
-- are dropped, and the counters are recounted from the tables. Returns what it changed,
-- one line each ({} when nothing). O(holders + queued): run when check_counts() finds the
-- counters off, by "repair" (ppios-coord status and reset) and after a call failed on
-- such an entry (RedisLink).
local function repair()
  local fixed = {}
  local kinds = {{K_HOLD, 'hash'}, {K_YIELD, 'set'}, {K_QMT, 'list'}, {K_QPT, 'list'}, {K_PROCS, 'zset'},
                 {K_INFO, 'hash'}, {K_STATE, 'hash'}}
  for _, kt in ipairs(kinds) do
    local t = redis.call('TYPE', kt[1])['ok']
    if t ~= 'none' and t ~= kt[2] then
      redis.call('DEL', kt[1])
      fixed[#fixed + 1] = kt[1] .. ' was a ' .. t .. ', not a ' .. kt[2] .. ': deleted'
    end
  end
  local function registered(id)
    return owner(id) and redis.call('ZSCORE', K_PROCS, owner(id)) ~= false
  end
  local mm, pp, pts, dropped = 0, 0, {}, 0
  local hs = redis.call('HGETALL', K_HOLD)
  for i = 1, #hs, 2 do
    local c = string.match(hs[i + 1], '^([MP])|%d+$')
    if not c or not registered(hs[i]) then
      redis.call('HDEL', K_HOLD, hs[i])
      dropped = dropped + 1
    elseif c == 'M' then mm = mm + 1 else pp = pp + 1; pts[hs[i]] = true end
  end
  if dropped > 0 then fixed[#fixed + 1] = dropped .. ' holder(s) malformed or of no registered process: dropped' end
  local counts = {}
  for _, q in ipairs({K_QMT, K_QPT}) do
    local n, bad = 0, 0
    for _, e in ipairs(redis.call('LRANGE', q, 0, -1)) do
      local id = parse_entry(e)
      if not id or not registered(id) then
        bad = bad + redis.call('LREM', q, 1, e)
      else
        n = n + 1
      end
    end
    if bad > 0 then fixed[#fixed + 1] = bad .. ' queue entr(ies) in ' .. q .. ' malformed or of no registered process: dropped' end
    counts[#counts + 1] = n
  end
  local yy, ybad = 0, 0
  for _, h in ipairs(redis.call('SMEMBERS', K_YIELD)) do
    if pts[h] then yy = yy + 1 else ybad = ybad + 1; redis.call('SREM', K_YIELD, h) end
  end
  if ybad > 0 then fixed[#fixed + 1] = ybad .. ' yield request(s) for no PT holder: dropped' end
  local was = {m = m, p = p, qm = qm, qp = qp, y = y}
  m, p, qm, qp, y = mm, pp, counts[1], counts[2], yy
  for _, f in ipairs({{'m', m}, {'p', p}, {'qm', qm}, {'qp', qp}, {'y', y}}) do
    if was[f[1]] ~= f[2] then fixed[#fixed + 1] = 'counter ' .. f[1] .. ' was ' .. was[f[1]] .. ', recounted ' .. f[2] end
  end
  return fixed  -- (save() writes the counters that now differ from what was read)
end

-- O(1): the counters against the sizes of their tables; repair() when they disagree.
local function check_counts()
  local ok = redis.pcall('HLEN', K_HOLD) == m + p and redis.pcall('LLEN', K_QMT) == qm and
             redis.pcall('LLEN', K_QPT) == qp and redis.pcall('SCARD', K_YIELD) == y
  if not ok then repair() end
end

local function register(proc, lease, hostpid)
  local added = redis.call('ZADD', K_PROCS, clock() + tonumber(lease), proc)
  redis.call('HSET', K_INFO, proc, hostpid)
  return added
end

if op == 'acquire' then
  local proc, id, cls, lead, throttle = ARGV[2], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
  if cls == 'M' then lead = '0' end
  if not redis.call('ZSCORE', K_PROCS, proc) then register(proc, ARGV[3], ARGV[4]) end
  check_counts()  -- phantom waiters would make every request queue
  local function grantable()
    if cls == 'M' then return mt_grantable(throttle) end
    return pt_grantable() and qm + qp == 0
  end
  -- Dead holders are only looked for when they could be what stands in the way and no
  -- waiter is already looking: waiters reap in "check" and every process in "renew".
  if not grantable() and qm + qp == 0 and reap() then promote() end
  if grantable() then
    grant(id, cls, lead)
    save()
    return 1
  end
  local e = entry(id, lead, throttle)
  if cls == 'M' then
    redis.call('RPUSH', K_QMT, e)
    qm = qm + 1
  else
    redis.call('RPUSH', K_QPT, e)
    qp = qp + 1
  end
  request_yields()
  save()
  return 0
elseif op == 'release' then
  -- Somebody waits (the fast path did not apply): free, then hand the slot on.
  if not free_holder(ARGV[2], ARGV[3]) then return 0 end
  if ARGV[4] and ARGV[4] ~= '0' then redis.call('HINCRBY', K_STATE, 'bytes', ARGV[4]) end
  promote()
  save()
  return 1
elseif op == 'check' then
  -- ARGV: id cls lead throttle (as given to acquire).
  -- 1 granted, {0, g} still waiting (g: the state's grant count), -1 lost (reaped or
  -- reset: acquire again)
  local id = ARGV[2]
  local q = ARGV[3] == 'M' and K_QMT or K_QPT
  local e = entry(id, ARGV[3] == 'M' and '0' or ARGV[4], ARGV[5])
  local function granted()
    if redis.call('HEXISTS', K_HOLD, id) == 1 then
      redis.call('DEL', prefix .. 'w:' .. id)
      return true
    end
    return false
  end
  local function waiting() return redis.call('LPOS', q, e) ~= false end
  check_counts()
  if granted() then return 1 end
  if not waiting() then return -1 end
  -- (The waiters of a recovery that is over are served by whichever of them checks first.)
  if reap() or (st[9] and not recovering()) then promote() else request_yields() end
  save()
  if granted() then return 1 end
  if not waiting() then return -1 end
  return {0, tonumber(redis.call('HGET', K_STATE, 'g') or '0') or 0}
elseif op == 'withdraw' then
  -- ARGV: id cls lead throttle (as given to acquire). A waiter gives up (its wait passed
  -- its bound): 1 when its grant came first (the slot is the caller's after all), else 0,
  -- out of the queue.
  local id, cls = ARGV[2], ARGV[3]
  redis.call('DEL', prefix .. 'w:' .. id)
  if redis.call('HEXISTS', K_HOLD, id) == 1 then return 1 end
  local removed = redis.call('LREM', cls == 'M' and K_QMT or K_QPT, 1, entry(id, cls == 'M' and '0' or ARGV[4], ARGV[5]))
  if cls == 'M' then qm = qm - removed else qp = qp - removed end
  promote()  -- PTs a withdrawn MT held back may go now
  save()
  return 0
elseif op == 'renew' then
  -- ARGV: proc lease hostpid [epoch]. Returns {1 when the process had lost its lease, the
  -- cap} (the cap a client stores again should the state be lost).
  check_counts()
  if reap() then promote() end
  local added = register(ARGV[2], ARGV[3], ARGV[4])
  save()
  return {added, n}
elseif op == 'epoch' then
  -- ARGV: lost (1: the caller saw an epoch before) lease [the epoch it saw]. Returns the
  -- state's epoch, made now when it has none. A caller that finds another epoch than the
  -- one it saw (the state was lost under it) while the new one is younger than its lease
  -- starts a recovery (rend) ending one lease after the epoch was made. The same epoch is
  -- no loss (a process back from an outage of its own, the state kept): no recovery, or
  -- one reconnect in the state's first lease would stop every grant of every job.
  local ep = st[8]
  if not ep then
    local t = redis.call('TIME')
    ep = t[1] .. '.' .. t[2]
    redis.call('HSET', K_STATE, 'ep', ep)
    -- Counters that say nothing is held or queued (a new state, or one lost with its
    -- counters) make any holders and queue entries left orphans: their later release or
    -- reaping would take slots off the new counters.
    if m + p + qm + qp == 0 then redis.call('DEL', K_HOLD, K_YIELD, K_QMT, K_QPT) end
  end
  if ARGV[2] == '1' and ep ~= ARGV[4] then
    local s, us = string.match(ep, '^(%d+)%.(%d+)$')
    local ends = (tonumber(s) or 0) * 1000 + math.floor((tonumber(us) or 0) / 1000) + tonumber(ARGV[3])
    if ends > clock() and ends > (tonumber(st[9]) or 0) then redis.call('HSET', K_STATE, 'rend', ends) end
  end
  return ep
elseif op == 'repair' then
  -- ppios-coord status and reset, and a client whose call failed on a malformed entry:
  -- {what was changed, ...}.
  local fixed = repair()
  reap()
  promote()
  save()
  return fixed
elseif op == 'unregister' then
  drop_process(ARGV[2])
  promote()
  save()
  return 1
elseif op == 'adopt' then
  -- ARGV: wanted (-1: none) [auto (1: PPIOS_THRESHOLD=auto)]. Stores wanted if no
  -- threshold is stored; returns the stored one. auto turns learning on, from 1 if no
  -- cap is stored.
  local wanted = tonumber(ARGV[2])
  if ARGV[3] == '1' then
    learning_on()
    if n < 1 and wanted < 1 then wanted = 1 end  -- (a rebuild stores the cap it had learned)
  end
  if n < 0 and wanted >= 0 then
    redis.call('HSET', K_STATE, 'n', wanted)
    n = wanted
    promote()
    save()
  end
  return n
elseif op == 'set-threshold' then
  local v = tonumber(ARGV[2])
  redis.call('HDEL', K_STATE, 'auto', 'hold')
  if v < 0 then redis.call('HDEL', K_STATE, 'n') else redis.call('HSET', K_STATE, 'n', v) end
  n = v < 0 and -1 or v
  promote()
  save()
  -- Two-level backend: every node agent syncs now and adopts the new cap.
  for _, node in ipairs(redis.call('HKEYS', prefix .. 'nodes')) do
    if not redis.call('LPOS', prefix .. 'nw:' .. node, '1') then redis.call('RPUSH', prefix .. 'nw:' .. node, 1) end
  end
  return n
elseif op == 'status' then
  if reap() then promote() end
  save()
  local out = {n, m, p, qm, qp, redis.call('ZCARD', K_PROCS), seen}
  local hs = redis.call('HGETALL', K_HOLD)
  for i = 1, #hs, 2 do
    out[#out + 1] = hs[i + 1]
    out[#out + 1] = (owner(hs[i]) and redis.call('HGET', K_INFO, owner(hs[i]))) or '?|0'
    out[#out + 1] = redis.call('SISMEMBER', K_YIELD, hs[i])
  end
  return out
elseif op == 'reset' then
  redis.call('DEL', K_STATE, K_HOLD, K_YIELD, K_QMT, K_QPT, K_PROCS, K_INFO, prefix .. 'ctlr', prefix .. 'curve',
             prefix .. 'nodes', prefix .. 'ngive', prefix .. 'ncseq', prefix .. 'nrecover')
  return 1
elseif op == 'set-auto' then
  learning_on()
  if n < 1 then
    redis.call('HSET', K_STATE, 'n', 1)
    n = 1
    promote()
    save()
  end
  return n
elseif op == 'ctl-lead' then
  -- ARGV: proc lease. The controller lease: taken when free or expired, renewed by its holder.
  local cur = redis.call('GET', prefix .. 'ctlr')
  if cur and cur ~= ARGV[2] then return 0 end
  redis.call('SET', prefix .. 'ctlr', ARGV[2], 'PX', ARGV[3])
  return 1
elseif op == 'ctl-resign' then
  if redis.call('GET', prefix .. 'ctlr') == ARGV[2] then redis.call('DEL', prefix .. 'ctlr') end
  return 1
elseif op == 'ctl-sample' then
  local a = redis.call('HMGET', K_STATE, 'bytes', 'auto', 'hold')
  return {tonumber(a[1] or 0), n, m + p, qm + qp, tonumber(a[2] or 0), tonumber(a[3] or 0), m + qm}
elseif op == 'ctl-set' then
  -- ARGV: k hold(0|1). Only while learning is on: a cap set by hand wins.
  if redis.call('HGET', K_STATE, 'auto') then
    redis.call('HSET', K_STATE, 'n', tonumber(ARGV[2]), 'hold', ARGV[3] == '1' and 1 or 0)
    n = tonumber(ARGV[2])
    hold = ARGV[3] == '1'
    promote()
    save()
  end
  return n
elseif op == 'curve-put' then
  -- ARGV: "k:mibps,k:mibps,..." replaces the curve.
  redis.call('DEL', prefix .. 'curve')
  for k, v in string.gmatch(ARGV[2], '(%d+):([%d%.]+)') do redis.call('HSET', prefix .. 'curve', k, v) end
  return 1
elseif op == 'status-auto' then
  -- {auto, hold, controller "host|pid" or "", k1, mibps1, ...} (strings: MiB/s are fractional)
  local a = redis.call('HMGET', K_STATE, 'auto', 'hold')
  local info = ''
  local ctl = redis.call('GET', prefix .. 'ctlr')
  if ctl then info = redis.call('HGET', K_INFO, ctl) or '?|0' end
  local out = {a[1] or '0', a[2] or '0', info}
  local c = redis.call('HGETALL', prefix .. 'curve')
  for i = 1, #c do out[#out + 1] = c[i] end
  return out
elseif op == 'node-sync' then
  -- The nodes' MT entitlements: the cap split max-min fairly by MT need among the nodes
  -- with MTs (a node that needs less than an even split gets its need, the rest is split
  -- again); the remainder of the last split goes one slot each to as many nodes, in
  -- turns of 50 ms (server time) in the order of their names. {node -> slots}.
  local function entitlements(me, mtneed, others, cap, now)
    local d = {}
    if mtneed > 0 then d[#d + 1] = {me, mtneed} end
    for _, o in ipairs(others) do
      if o[4] > 0 then d[#d + 1] = {o[1], o[4]} end
    end
    table.sort(d, function(a, b) return a[2] < b[2] or (a[2] == b[2] and a[1] < b[1]) end)
    local ent, left, i = {}, cap, 1
    while i <= #d and d[i][2] <= math.floor(left / (#d - i + 1)) do
      ent[d[i][1]] = d[i][2]
      left = left - d[i][2]
      i = i + 1
    end
    local rest = {}
    for j = i, #d do rest[#rest + 1] = d[j][1] end
    if #rest > 0 then
      table.sort(rest)
      local base, extra = math.floor(left / #rest), left % #rest
      local start = (math.floor(now / 50) * extra) % #rest
      for j, name in ipairs(rest) do
        ent[name] = base + (((j - 1 - start) % #rest) < extra and 1 or 0)
      end
    end
    return ent
  end
  -- The two-level backend (NodeCoordinator.h). ARGV: node lease floor need mtneed pt lead
  -- [epoch: the state's, as the agent saw it; another one or none answers -2 above].
  -- floor: slots the node may be using now (its local cap or what is in flight, the larger):
  -- its share is never recorded below it, so the sum of the recorded shares bounds what is
  -- in use. need: in flight + queued on the node; mtneed: MTs in flight + queued; pt: PTs
  -- in flight; lead: the largest lead of those PTs. Returns {share, target, cap, live nodes, free, others' unmet need, others'
  -- unmet MT need, credit seq}; the node lowers its local cap to target (<= share) and
  -- reports again. Credit seq: the last credit to this node its share includes.
  local K_NODES, K_GIVE, K_CSEQ = prefix .. 'nodes', prefix .. 'ngive', prefix .. 'ncseq'
  local me, lease = ARGV[2], tonumber(ARGV[3])
  local floor, need, mtneed, pt = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
  local lead = tonumber(ARGV[8]) or 0
  local t = clock()
  local all = redis.call('HGETALL', K_NODES)
  local share, total, live, others_need, others_mt, known = 0, 0, 1, 0, 0, false
  local others = {}
  for i = 1, #all, 2 do
    local s, nd, mn, pp, dl, ld = string.match(all[i + 1], '^(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)$')
    if all[i] == me then
      if s and tonumber(dl) >= t then share, known = tonumber(s), true end
    elseif not s or tonumber(dl) < t then
      redis.call('HDEL', K_NODES, all[i])  -- its lease ended: the share returns
      redis.call('HDEL', K_GIVE, all[i])
    else
      s, nd, mn, pp = tonumber(s), tonumber(nd), tonumber(mn), tonumber(pp)
      total, live = total + s, live + 1
      others_need = others_need + math.max(0, nd - s)
      others_mt = others_mt + math.max(0, mn - s)
      others[#others + 1] = {all[i], s, nd, mn, pp, tonumber(ld), dl}
    end
  end
  -- The server lost its records (it restarted empty) while nodes held slots: a node
  -- reports slots it may be using (floor > 0) and has no live record. For
  -- one lease from then, time for every node that may hold slots to report again, no
  -- node grows beyond what it holds, so the recorded shares, each at least its node's
  -- floor, never add up to more than the cap while they reconcile.
  local K_RECOVER = prefix .. 'nrecover'
  if not known and floor > 0 then redis.call('SET', K_RECOVER, 1, 'PX', lease) end
  local recovering = redis.call('EXISTS', K_RECOVER) == 1
  local target, free = -1, 0
  local ent, ent_me = {}, 0  -- MT entitlements by node (n >= 0 only)
  if n < 0 then
    share = math.max(floor, need)  -- no cap: recorded for status only
  else
    free = n - total - share
    local fair = math.max(1, math.floor(n / live))
    -- Sharing with nodes that need more, a node keeps up to the fair share rounded up: the
    -- remainder of n / live is used, and growth only from free slots keeps the sum <= n.
    local fair_up = math.max(1, math.ceil(n / live))
    -- ... unless a node that needs slots holds less than the fair share: then down to it.
    local starved = false
    for _, o in ipairs(others) do
      if o[3] > o[2] and o[2] < fair then starved = true end
    end
    local keep = starved and fair or fair_up
    -- MTs across nodes (the rule of docs/design/coordinator.md): the nodes whose MTs need
    -- slots (mtneed > 0, us included) are entitled to a max-min fair split of the cap by
    -- their MT need; what does not divide evenly goes in turns of kTurnMs. While another
    -- node's MTs hold less than their entitlement, a node of them keeps no more than its
    -- own, even for its own MTs: its freed slots go back to the pool (the local cap drops,
    -- its MTs wait) and are credited to the nodes below their entitlement. So a saturated
    -- node cannot keep reusing its slots while another node's MTs wait.
    ent = entitlements(me, mtneed, others, n, t)
    ent_me = ent[me] or 0
    local contested = false
    for _, o in ipairs(others) do
      if ent[o[1]] and o[2] < ent[o[1]] then contested = true end
    end
    local mt_fair = contested and mtneed > 0
    target = share
    -- Over the cap (nodes came back from an outage with their fair shares): back to fair.
    if free < 0 then target = math.min(target, fair) end
    -- Slots our PTs owe to a remote node's waiting MTs (ngive, assigned below by that node's
    -- sync) go first; then other nodes' needs take what we do not use or hold beyond the
    -- fair share. Our own MTs keep theirs.
    local give = tonumber(redis.call('HGET', K_GIVE, me) or '0') or 0
    if give > 0 and others_mt == 0 then redis.call('HDEL', K_GIVE, me); give = 0 end  -- no remote MT waits any more
    local limit = give > 0 and math.max(mtneed, share - give) or n
    target = math.min(target, limit)
    if others_need > 0 then target = math.min(target, math.max(math.min(need, keep), mtneed)) end
    if mt_fair then target = math.min(target, ent_me) end
    -- Growth from the free slots only: beyond the fair share only while nobody else
    -- needs more (or for our MTs), and for PTs only while no remote MT waits.
    local up = need
    if others_need > 0 then up = math.min(up, math.max(keep, mtneed)) end
    if others_mt > 0 and mtneed <= share then up = math.min(up, share) end
    if mt_fair then up = math.min(up, ent_me) end
    if up > target then target = math.max(target, math.min(up, limit, share + math.max(free, 0))) end
    -- Never beyond what the others leave: MTs past the cap (PPIOS_MT_THROTTLE=0) raise the
    -- floor, hence the recorded share, but must not raise the cap PTs see.
    target = math.min(target, math.max(0, n - total))
    if recovering then target = math.min(target, math.max(share, floor)) end
  end
  -- A plain wake-up ("1") is pushed once; "g"/"c" messages in the list do not stand for it.
  local function wake(name)
    local k = prefix .. 'nw:' .. name
    if not redis.call('LPOS', k, '1') then redis.call('RPUSH', k, 1); redis.call('PEXPIRE', k, lease) end
  end
  -- Our MTs wait beyond what is owed to us already: the nodes whose PTs lead furthest owe
  -- the rest (the victim rule of the PPIOS paper (Zhao, Yoshigoe and Xie, 2013), across
  -- nodes) and are woken to lower their caps, which asks those PTs to yield at their next
  -- sub-read boundary. Records may be a sync old: the agent of a node whose MTs wait syncs
  -- again every few ms, with the others' fresher ones.
  if n >= 0 and mtneed > target then
    local short = mtneed - target
    local owed = 0
    local g = redis.call('HGETALL', K_GIVE)
    for i = 2, #g, 2 do owed = owed + (tonumber(g[i]) or 0) end
    table.sort(others, function(a, b) return a[6] > b[6] or (a[6] == b[6] and a[5] > b[5]) end)
    for _, o in ipairs(others) do
      if owed >= short then break end
      local k = math.min(o[5], short - owed)
      if k > 0 then
        redis.call('HINCRBY', K_GIVE, o[1], k)
        owed = owed + k
        -- "g<k>": its listener lowers its cap by k at once (its agent syncs after).
        local w = prefix .. 'nw:' .. o[1]
        redis.call('RPUSH', w, 'g' .. k)
        redis.call('PEXPIRE', w, lease)
      end
    end
  end
  local old = share
  share = math.max(target, floor)
  redis.call('HSET', K_NODES, me, share .. '|' .. need .. '|' .. mtneed .. '|' .. pt .. '|' .. (t + lease) .. '|' .. lead)
  -- The highest sum of recorded shares: an upper bound of the slots ever in flight at once
  -- (what status shows as max_inflight_seen for this backend).
  if total + share > (tonumber(redis.call('HGET', K_STATE, 'nmax')) or 0) then
    redis.call('HSET', K_STATE, 'nmax', total + share)
  end
  -- Below the fair share with nothing free: the nodes above it are woken to give back.
  if n >= 0 and need > target and target < math.max(1, math.floor(n / live)) and n - total - share <= 0 then
    for _, o in ipairs(others) do
      if o[2] > math.max(1, math.floor(n / live)) then wake(o[1]) end
    end
  end
  -- Our MTs below their entitlement with nothing free: the nodes above theirs give back.
  if n >= 0 and mtneed > target and target < ent_me and n - total - share <= 0 then
    for _, o in ipairs(others) do
      if ent[o[1]] and o[2] > ent[o[1]] then wake(o[1]) end
    end
  end
  -- Slots we gave back settle our debt; nodes short of slots can take them now.
  if share < old then
    local owed = tonumber(redis.call('HGET', K_GIVE, me) or '0') or 0
    if owed > old - share then redis.call('HSET', K_GIVE, me, owed - (old - share))
    elseif owed > 0 then redis.call('HDEL', K_GIVE, me) end
    -- The slots that came back go straight to the nodes whose MTs wait, up to what each
    -- lacks: their recorded shares grow here (from slots free now, so the sum stays <= n)
    -- and "c<seq>:<k>" tells their listeners to raise their caps by k at once, without a
    -- sync of their own (NodeCoordinator.h: a credit newer than the node's last sync).
    local freed = old - share
    -- (Not while recovering: nodes without a record may hold what looks free.)
    local avail = (n >= 0 and not recovering) and math.min(freed, n - total - share) or 0
    -- First to the nodes whose MTs are below their entitlement, up to it, then to the
    -- nodes whose MTs wait, the smallest share first.
    local order = {}
    for _, o in ipairs(others) do
      if o[4] > o[2] then order[#order + 1] = o end
    end
    table.sort(order, function(a, b)
      local sa, sb = (ent[a[1]] or 0) - a[2], (ent[b[1]] or 0) - b[2]
      if sa ~= sb then return sa > sb end
      if a[2] ~= b[2] then return a[2] < b[2] end
      return a[1] < b[1]
    end)
    for pass = 1, 2 do
    for _, o in ipairs(order) do
      if avail <= 0 then break end
      local want = pass == 1 and math.min(o[4], ent[o[1]] or 0) - o[2] or o[4] - o[2]
      if want > 0 then
        local c = math.min(avail, want)
        o[2], total, avail, freed = o[2] + c, total + c, avail - c, freed - c
        redis.call('HSET', K_NODES, o[1], o[2] .. '|' .. o[3] .. '|' .. o[4] .. '|' .. o[5] .. '|' .. o[7] .. '|' .. o[6])
        local seq = redis.call('HINCRBY', K_CSEQ, o[1], 1)
        local w = prefix .. 'nw:' .. o[1]
        redis.call('RPUSH', w, 'c' .. seq .. ':' .. c)
        redis.call('PEXPIRE', w, lease)
      end
    end
    end
    -- As many nodes as slots are left, those whose MTs wait first, sync to take them.
    local woken = 0
    for pass = 1, 2 do
      for _, o in ipairs(others) do
        local short = pass == 1 and o[4] > o[2] or (pass == 2 and o[4] <= o[2] and o[3] > o[2])
        if short and woken < freed then wake(o[1]); woken = woken + 1 end
      end
    end
  end
  if n >= 0 then free = n - total - share end
  -- The last credit counted in our share: later ones are raised by our listener.
  local cseq = tonumber(redis.call('HGET', K_CSEQ, me) or '0') or 0
  return {share, target, n, live, math.max(free, 0), others_need, others_mt, cseq}
elseif op == 'node-leave' then
  -- ARGV: node. Its processes are gone: the share returns now; nodes short of slots wake.
  local K_NODES = prefix .. 'nodes'
  redis.call('HDEL', K_NODES, ARGV[2])
  redis.call('HDEL', prefix .. 'ngive', ARGV[2])
  local all = redis.call('HGETALL', K_NODES)
  for i = 1, #all, 2 do
    local s, nd = string.match(all[i + 1], '^(%d+)|(%d+)|')
    if s and tonumber(nd) > tonumber(s) and not redis.call('LPOS', prefix .. 'nw:' .. all[i], '1') then
      redis.call('RPUSH', prefix .. 'nw:' .. all[i], 1)
    end
  end
  return 1
elseif op == 'node-hello' then
  -- ARGV: node lease. A node's first process makes the node known at once (share 0, which
  -- is its local cap until its agent syncs); an existing record is left alone.
  redis.call('HSETNX', prefix .. 'nodes', ARGV[2], '0|0|0|0|' .. (clock() + tonumber(ARGV[3])) .. '|0')
  return 1
elseif op == 'node-status' then
  -- {server ms, highest sum of shares, name, "share|need|mtneed|pt|deadline|lead", ...}
  local out = {tostring(clock()), tostring(redis.call('HGET', K_STATE, 'nmax') or '0')}
  local all = redis.call('HGETALL', prefix .. 'nodes')
  for i = 1, #all do out[#out + 1] = all[i] end
  return out
end
return redis.error_reply('ppios: unknown coordinator operation ' .. tostring(op))
)LUA";

}  // namespace ppios
