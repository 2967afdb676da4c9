"""The room bus's Lua scripts (``app.rooms.bus.redis_bus``): each is one atomic step on
Redis, so two replicas claiming a room, a lease renewed as it runs out, or a write retried
after a timeout that had in fact run cannot interleave. Kept apart from the Python that
calls them because they are a language of their own, read and reviewed as such.
"""

from __future__ import annotations

# Append an entry unless its marker says it is there already (a retry of a write that ran).
# XADD first: under OOM the script fails before anything is written.
# KEYS: stream, sent-set. ARGV: marker ('' = none), maxlen, ttl ms, field, value, ...
APPEND = """
if ARGV[1] ~= '' and redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 0 end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(fields))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if ARGV[1] ~= '' then
  redis.call('SADD', KEYS[2], ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return 1
"""
_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""
# Redis stalled (every replica beats every third of a lease, so a beat older than
# ARGV[stale] means nobody could reach it, or it stood still: SIGSTOP, a long fork, a
# swap storm): while it stood, leases ran out on its clock that their owners could not
# renew. Claims then wait one lease, as after a data loss, so the owners take their rooms
# back first. KEYS[2]: epoch, KEYS[3]: beat. Sets ``stalled`` to 1 when it opened the wait.
_STALL = """
local stalled = 0
local beat = redis.call('GET', KEYS[3])
if beat and now - tonumber(beat) > tonumber(ARGV[3]) then
  redis.call('SET', KEYS[2], now)
  stalled = 1
end
redis.call('SET', KEYS[3], now)
"""
# Claim a room. KEYS: owner, epoch, beat. ARGV: value, lease ms, stale ms. 1 taken (or ours
# already: a retry), 0 owned by another, -N: claims wait N ms more (Redis lost its data or
# stalled a moment ago: owners take their rooms back first).
CLAIM = _NOW + _STALL + """
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end  -- a retry of a claim that ran
local epoch = redis.call('GET', KEYS[2])
if not epoch then redis.call('SET', KEYS[2], now) return -tonumber(ARGV[2]) end
local left = tonumber(ARGV[2]) - (now - tonumber(epoch))
if left > 0 then return -left end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""
# A replica's heartbeat (each lease round, rooms or none). KEYS: owner (unused), epoch,
# beat. ARGV: -, -, stale ms.
BEAT = _NOW + _STALL + "return stalled"
# Renew our lease. KEYS: owner, epoch. ARGV: value, lease ms, '1' to take the room again
# when the lease ran out ('0' for a talk being released: its release may just have landed).
# 1 renewed, 2 taken again (it had run out, or Redis lost it), 3 gone (not taken again),
# 0 another replica's now.
RENEW = _NOW + """
if not redis.call('GET', KEYS[2]) then redis.call('SET', KEYS[2], now) end
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if v then return 0 end
if ARGV[3] ~= '1' then return 3 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 2
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

__all__ = ["APPEND", "BEAT", "CLAIM", "RELEASE", "RENEW"]
