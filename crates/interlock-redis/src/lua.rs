//! The Lua source of the eleven scripts: a prelude every script but
//! `confirm` starts with (the strict loader, the clock, `save`, `note` and
//! `reply`), then one body per operation. Their arguments and replies are described in
//! `scripts.rs`, which loads and calls them.
//!
//! Every write goes through the prelude's `save`, and every lifetime
//! change through `note`, which keeps the storage's change index (issue
//! 29) when the script was given its two keys: the epoch counter and the
//! change log in one sorted set, and the expiry of every key in another.

pub(crate) const PRELUDE: &str = r"
local MAX_EXACT = 9007199254740991
local MAX_VERSION = 1125899906842624
local MAX_U32 = 4294967295
-- Why this script's change notice could not be published ('' if it was).
local notice_error = ''

local function fail(what)
  error('interlock: ' .. what .. ' (corrupt or foreign breaker hash)', 0)
end

local function int(field, raw, max)
  if type(raw) ~= 'string' or #raw == 0 or #raw > 16 or not string.match(raw, '^%d+$') then
    fail('field ' .. field .. ' is missing or not a decimal integer')
  end
  local n = tonumber(raw)
  if n > max then
    fail('field ' .. field .. ' is out of range')
  end
  return n
end

local function load(key)
  local raw = redis.call('HMGET', key, 'state', 'opened_at', 'version', 'probes_permitted',
    'probes_remaining', 'probes_completed', 'probe_failures', 'probe_slows', 'v')
  local s = { state = 'closed', opened_at = 0, version = 0, permitted = 0, remaining = 0,
    completed = 0, failures = 0, slows = 0, exists = false }
  local any = false
  for i = 1, 9 do
    if raw[i] then any = true end
  end
  if not any then
    if redis.call('EXISTS', key) == 1 then
      fail('the hash has none of the breaker fields')
    end
    return s
  end
  if raw[9] and raw[9] ~= '1' then
    fail('unknown schema marker v')
  end
  local state = raw[1]
  if state ~= 'closed' and state ~= 'open' and state ~= 'half_open' then
    fail('field state is missing or unknown')
  end
  s.state = state
  s.opened_at = int('opened_at', raw[2], MAX_EXACT)
  s.version = int('version', raw[3], MAX_VERSION)
  s.permitted = int('probes_permitted', raw[4], MAX_U32)
  s.remaining = int('probes_remaining', raw[5], MAX_U32)
  s.completed = int('probes_completed', raw[6], MAX_U32)
  s.failures = int('probe_failures', raw[7], MAX_U32)
  s.slows = int('probe_slows', raw[8], MAX_U32)
  s.exists = true
  return s
end

local clock
local function now_us()
  if not clock then
    local t = redis.call('TIME')
    clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return clock
end

local function bump(version)
  if version < MAX_VERSION then return version + 1 end
  return MAX_VERSION
end

local function add32(a, b)
  local n = a + b
  if n > MAX_U32 then return MAX_U32 end
  return n
end

local function fenced_out(s, expected)
  return expected ~= '' and tonumber(expected) ~= s.version
end

local function digits(n)
  return string.format('%.0f', n)
end

-- The change index (issue 29), when the script was given its keys: a
-- sorted set of the last LOG_CAP applied writes, member
-- '<epoch>:<server time in us>:<version written>:<key>' scored by the
-- epoch (the highest score is the storage's epoch), and a sorted set of
-- every key scored by the millisecond its lifetime ends. nil: this
-- storage keeps no index.
local index_key, expiry_key
local LOG_CAP = 10000
local EXPIRY_RETAIN_MS = 3600000

local function top_of(log)
  local top = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
  if not top[1] then return 0, '0' end
  return tonumber(top[2]), string.match(top[1], '^%d+:(%d+):') or '0'
end

-- A key's lifetime was set to ttl_ms from now; `version`: the hash was
-- rewritten too, at that version, which takes the next epoch (nil: only
-- the lifetime). Returns the log entry written, if any.
local function note(key, ttl_ms, version)
  if not index_key then return nil end
  local ms = math.floor(now_us() / 1000)
  local entry
  if version then
    local epoch = top_of(index_key) + 1
    entry = digits(epoch) .. ':' .. digits(now_us()) .. ':' .. digits(version) .. ':' .. key
    redis.call('ZADD', index_key, epoch, entry)
    redis.call('ZREMRANGEBYRANK', index_key, 0, -(LOG_CAP + 1))
  end
  -- Both outlive every key they describe by the retention window, so a
  -- cursor stays good while the breakers expire.
  local keep = digits(tonumber(ttl_ms) + EXPIRY_RETAIN_MS)
  if redis.call('PTTL', index_key) < tonumber(keep) then
    redis.call('PEXPIRE', index_key, keep)
  end
  redis.call('ZADD', expiry_key, ms + tonumber(ttl_ms), key)
  redis.call('ZREMRANGEBYSCORE', expiry_key, '-inf', '(' .. digits(ms - EXPIRY_RETAIN_MS))
  if redis.call('PTTL', expiry_key) < tonumber(keep) then
    redis.call('PEXPIRE', expiry_key, keep)
  end
  return entry
end

-- An applied change: rewrite the hash, refresh its lifetime and, unless
-- the channel is '', publish '<version> <key>' in the same script, then
-- (with the change index) 'epoch ' and the write's log entry, so a
-- subscriber learns every epoch in order (an older parser ignores the
-- second message: it does not start with a version). The publish cannot
-- fail the write: a refusal (ACLs without channel rights) is kept for the
-- reply.
local function save(key, s, ttl_ms, channel)
  redis.call('HSET', key, 'state', s.state, 'opened_at', digits(s.opened_at),
    'version', digits(s.version), 'probes_permitted', digits(s.permitted),
    'probes_remaining', digits(s.remaining), 'probes_completed', digits(s.completed),
    'probe_failures', digits(s.failures), 'probe_slows', digits(s.slows), 'v', '1')
  redis.call('PEXPIRE', key, ttl_ms)
  local entry = note(key, ttl_ms, s.version)
  if channel ~= '' then
    -- '<version> <key>', then the record after a newline (a key never
    -- holds a control character): 'state opened_at permitted remaining
    -- completed failures slows'.
    local record = s.state .. ' ' .. digits(s.opened_at) .. ' ' .. digits(s.permitted) .. ' '
      .. digits(s.remaining) .. ' ' .. digits(s.completed) .. ' ' .. digits(s.failures) .. ' '
      .. digits(s.slows)
    local r = redis.pcall('PUBLISH', channel, digits(s.version) .. ' ' .. key .. '\n' .. record)
    if type(r) == 'table' and r.err then
      notice_error = tostring(r.err)
    elseif entry then
      redis.pcall('PUBLISH', channel, 'epoch ' .. entry)
    end
  end
end

local function reply(code, s)
  return { code, s.state, s.opened_at, s.version, s.permitted, s.remaining, s.completed,
    s.failures, s.slows, notice_error }
end

local function fresh(state, opened_at, version)
  return { state = state, opened_at = opened_at, version = version, permitted = 0,
    remaining = 0, completed = 0, failures = 0, slows = 0 }
end

local function read(key)
  local s = load(key)
  if s.exists then return reply(1, s) end
  return reply(0, s)
end

local function begin(key, wait_us, permitted, ttl_ms, channel)
  local s = load(key)
  if s.state ~= 'open' then return reply(0, s) end
  local now = now_us()
  -- An OPEN that began in the future (a foreign writer, a clock stepped
  -- back) would never elapse: clamp it to now, as an applied change.
  local future = s.opened_at > now
  if future then s.opened_at = now end
  if now - s.opened_at < tonumber(wait_us) then
    if not future then return reply(0, s) end
    s.version = bump(s.version)
    save(key, s, ttl_ms, channel)
    return reply(1, s)
  end
  local half = fresh('half_open', s.opened_at, bump(s.version))
  half.permitted = tonumber(permitted)
  half.remaining = half.permitted
  save(key, half, ttl_ms, channel)
  return reply(1, half)
end
";

/// `read`: no arguments. Every single-key script takes the change index's
/// keys as `KEYS[2]` and `KEYS[3]`, or neither (no index).
pub(crate) const READ: &str = r"
index_key, expiry_key = KEYS[2], KEYS[3]
return read(KEYS[1])
";

/// `trip_open`: ARGV = channel, ttl_ms, expected version or ''.
pub(crate) const TRIP: &str = r"
index_key, expiry_key = KEYS[2], KEYS[3]
local key = KEYS[1]
local s = load(key)
if fenced_out(s, ARGV[3]) then return reply(0, s) end
if s.state == 'open' then
  redis.call('PEXPIRE', key, ARGV[2])
  note(key, ARGV[2], nil)
  return reply(0, s)
end
local open = fresh('open', now_us(), bump(s.version))
save(key, open, ARGV[2], ARGV[1])
return reply(1, open)
";

/// `begin_half_open_if_elapsed`: ARGV = channel, wait_us, permitted, ttl_ms.
pub(crate) const BEGIN: &str = r"
index_key, expiry_key = KEYS[2], KEYS[3]
return begin(KEYS[1], ARGV[2], ARGV[3], ARGV[4], ARGV[1])
";

/// `lease_probe`: ARGV = channel, ttl_ms.
pub(crate) const LEASE: &str = r"
index_key, expiry_key = KEYS[2], KEYS[3]
local key = KEYS[1]
local s = load(key)
if s.state ~= 'half_open' or s.remaining < 1 then return reply(0, s) end
s.remaining = s.remaining - 1
s.version = bump(s.version)
save(key, s, ARGV[2], ARGV[1])
return reply(1, s)
";

/// `record_probe`: ARGV = channel, failure (0/1), slow (0/1), ttl_ms.
pub(crate) const RECORD: &str = r"
index_key, expiry_key = KEYS[2], KEYS[3]
local key = KEYS[1]
local s = load(key)
if s.state ~= 'half_open' then return reply(0, s) end
s.completed = add32(s.completed, 1)
s.failures = add32(s.failures, tonumber(ARGV[2]))
s.slows = add32(s.slows, tonumber(ARGV[3]))
s.version = bump(s.version)
save(key, s, ARGV[4], ARGV[1])
return reply(1, s)
";

/// `close`: ARGV = channel, ttl_ms, expected version or ''.
pub(crate) const CLOSE: &str = r"
index_key, expiry_key = KEYS[2], KEYS[3]
local key = KEYS[1]
local s = load(key)
if fenced_out(s, ARGV[3]) then return reply(0, s) end
local closed = fresh('closed', 0, bump(s.version))
save(key, closed, ARGV[2], ARGV[1])
return reply(1, closed)
";

/// `restart_stalled_round`: ARGV = channel, expected version, permitted,
/// ttl_ms.
pub(crate) const RESTART: &str = r"
index_key, expiry_key = KEYS[2], KEYS[3]
local key = KEYS[1]
local s = load(key)
if tonumber(ARGV[2]) ~= s.version or s.state ~= 'half_open' or s.remaining > 0 then
  return reply(0, s)
end
local round = fresh('half_open', s.opened_at, bump(s.version))
round.permitted = tonumber(ARGV[3])
round.remaining = round.permitted
save(key, round, ARGV[4], ARGV[1])
return reply(1, round)
";

/// `restore`: ARGV = channel, expected version, ttl_ms, then the state to
/// write: state, opened_at_us, version, permitted, remaining, completed,
/// failures, slows.
pub(crate) const RESTORE: &str = r"
index_key, expiry_key = KEYS[2], KEYS[3]
local key = KEYS[1]
local s = load(key)
if tonumber(ARGV[2]) ~= s.version then return reply(0, s) end
local base = tonumber(ARGV[6])
if base < s.version then base = s.version end
local r = fresh(ARGV[4], 0, bump(base))
if r.state ~= 'closed' then
  r.opened_at = tonumber(ARGV[5])
  if r.opened_at > now_us() then r.opened_at = now_us() end
end
r.permitted = tonumber(ARGV[7])
r.remaining = tonumber(ARGV[8])
r.completed = tonumber(ARGV[9])
r.failures = tonumber(ARGV[10])
r.slows = tonumber(ARGV[11])
save(key, r, ARGV[3], ARGV[1])
return reply(1, r)
";

/// `poll`: a whole batched poll. KEYS = the breakers' hashes; ARGV[1] =
/// channel; then three values per key: wait_us ('' for a read), permitted,
/// ttl_ms. Replies with one item per key: the ten values of `read` or
/// `begin`, or `{'err', message}` when that key alone failed (a corrupt
/// hash, `WRONGTYPE`), so one bad key never fails the others.
pub(crate) const POLL: &str = r"
local channel = ARGV[1]
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local at = 3 * i - 1
  local ok, r = pcall(function()
    local wait = ARGV[at]
    if wait == '' then return read(key) end
    return begin(key, wait, ARGV[at + 1], ARGV[at + 2], channel)
  end)
  if ok then
    out[i] = r
  else
    if type(r) == 'table' then r = r.err or r.message end
    out[i] = { 'err', tostring(r) }
  end
end
return out
";

/// `changes`: a poll that reads what changed (issue 29). KEYS[1], KEYS[2]
/// = the change index's keys, then the breakers that must be answered;
/// ARGV = channel, the cursor's epoch ('' for none), its mark (the server
/// time of the write that made it), its time in ms, the most changes to
/// answer, the key prefix, then three values per breaker key as `poll`,
/// or '=', a version, 0 for a read the script may vouch for instead.
///
/// Replies `{head, changed, answers}`: head = {'delta' or 'full', epoch,
/// mark, server time in us}, taken before anything else; changed = key
/// and reply pairs of every record written or expired since the cursor
/// ('delta' only) that is not among the breaker keys; answers = one per
/// breaker key, as `poll`, or 0 for a '=' key whose last write since the
/// cursor (in the log, 'delta' only) wrote exactly that version and which
/// did not expire since: the caller's view is the record, not read.
pub(crate) const CHANGES: &str = r"
index_key, expiry_key = KEYS[1], KEYS[2]
local channel = ARGV[1]
local now_ms = math.floor(now_us() / 1000)
local changed = {}
local since = tonumber(ARGV[2])
local max = tonumber(ARGV[5])
local epoch, mark, logged
-- The version of each key's last write since the cursor, and the keys
-- that expired since.
local written, expired = {}, {}
if since and tonumber(ARGV[4]) - 1000 >= now_ms - EXPIRY_RETAIN_MS then
  -- One lookup: the cursor's own entry first (same epoch, same server
  -- time: the same history), then every write since, the last being the
  -- storage's epoch.
  local r = redis.call('ZRANGEBYSCORE', index_key, since, '+inf', 'LIMIT', 0, max + 2)
  local own = ARGV[2] .. ':' .. ARGV[3] .. ':'
  if r[1] and string.sub(r[1], 1, #own) == own and #r <= max + 1 then
    logged = {}
    for i = 2, #r do
      local v, key = string.match(r[i], '^%d+:%d+:(%d*):(.*)$')
      -- A member of another format: nothing here can be vouched for.
      if not v then logged = nil break end
      logged[#logged + 1] = key
      written[key] = v
    end
    if logged then
      local e, m = string.match(r[#r], '^(%d+):(%d+):')
      epoch, mark = tonumber(e), m
    end
  end
end
if not logged then
  epoch, mark = top_of(index_key)
  if epoch == 0 then
    -- A history begins: its first epoch is this entry (no key), so the
    -- cursor of every poll names a write of this history.
    redis.call('ZADD', index_key, 1, '1:' .. digits(now_us()) .. '::')
    redis.call('PEXPIRE', index_key, EXPIRY_RETAIN_MS)
    epoch, mark = top_of(index_key)
  end
end
local head = { 'full', epoch, mark, now_us() }
if logged then
  -- The keys asked for below are answered there: not read twice.
  local seen, keys = {}, {}
  for i = 3, #KEYS do seen[KEYS[i]] = true end
  local function add(key)
    if key and key ~= '' and not seen[key] then
      seen[key] = true
      keys[#keys + 1] = key
    end
  end
  for _, key in ipairs(logged) do add(key) end
  for _, key in ipairs(redis.call('ZRANGEBYSCORE', expiry_key,
      '(' .. digits(tonumber(ARGV[4]) - 1000), now_ms, 'LIMIT', 0, max + 1)) do
    expired[key] = true
    add(key)
  end
  if #keys <= max then
    head[1] = 'delta'
    local prefix = ARGV[6]
    for _, key in ipairs(keys) do
      if string.sub(key, 1, #prefix) == prefix then
        local ok, r = pcall(read, key)
        if not ok then
          if type(r) == 'table' then r = r.err or r.message end
          r = { 'err', tostring(r) }
        end
        changed[#changed + 1] = key
        changed[#changed + 1] = r
      end
    end
  end
end
local delta = head[1] == 'delta'
local out = {}
for i = 3, #KEYS do
  local key = KEYS[i]
  local at = 3 * (i - 2) + 4
  local wait = ARGV[at]
  if wait == '=' and delta and written[key] == ARGV[at + 1] and not expired[key] then
    out[i - 2] = 0
  else
    local ok, r = pcall(function()
      if wait == '' or wait == '=' then return read(key) end
      return begin(key, wait, ARGV[at + 1], ARGV[at + 2], channel)
    end)
    if ok then
      out[i - 2] = r
    else
      if type(r) == 'table' then r = r.err or r.message end
      out[i - 2] = { 'err', tostring(r) }
    end
  end
end
return { head, changed, out }
";

/// `confirm`: the change poll's short form (issue 29), on its own (no
/// prelude): a caller whose change notices brought every write since its
/// cursor asks only whether the storage agrees. KEYS = the change log, the
/// expiry set; ARGV = the cursor's epoch, its mark, its time in ms, the
/// top entry the caller expects ('' when it expects the cursor to be the
/// top).
///
/// Replies the server time in us when the log's top entry is the one
/// expected (or the cursor's own, for ''), the cursor's entry is still in
/// the log under its mark, and no key's lifetime ended since the cursor
/// (as `changes` looks, a second early); 0 otherwise (the caller then
/// polls with `changes`).
pub(crate) const CONFIRM: &str = r"
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = math.floor(now_us / 1000)
local EXPIRY_RETAIN_MS = 3600000
local since_ms = tonumber(ARGV[3]) - 1000
if since_ms < now_ms - EXPIRY_RETAIN_MS then return 0 end
local own = ARGV[1] .. ':' .. ARGV[2] .. ':'
local top = redis.call('ZRANGE', KEYS[1], -1, -1)[1]
if not top then return 0 end
if ARGV[4] == '' then
  if string.sub(top, 1, #own) ~= own then return 0 end
else
  if top ~= ARGV[4] then return 0 end
  local at = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1], 'LIMIT', 0, 1)[1]
  if not at or string.sub(at, 1, #own) ~= own then return 0 end
end
if redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. string.format('%.0f', since_ms), now_ms,
    'LIMIT', 0, 1)[1] then
  return 0
end
return now_us
";
