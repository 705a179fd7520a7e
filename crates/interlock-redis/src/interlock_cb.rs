//! The scripts of [`Layout::InterlockCb`](crate::Layout::InterlockCb): the
//! six operations (and a batched poll) with exactly the changes, fencing
//! and expiry that interlock-cb 2.8's Redis scripts apply, written for
//! this crate.
//!
//! What each script does to the hash at `KEYS[1]`, as the original does:
//!
//! | operation | applied when | fields written | `PEXPIRE` |
//! |---|---|---|---|
//! | `trip_open` | unfenced or `version` = expected, and not OPEN | all eight, `opened_at` = server `TIME` in µs, and `v` = 1 | whenever the fence passes (also while already OPEN) |
//! | `begin_half_open_if_elapsed` | OPEN and `TIME − opened_at ≥ wait` | `state`, `version`, the five probe counters (`opened_at` kept) | always, applied or not |
//! | `lease_probe` | HALF_OPEN with `probes_remaining > 0` | `probes_remaining`, `version` | always, granted or not |
//! | `record_probe` | HALF_OPEN | `probes_completed`, `probe_failures`, `probe_slows`, `version` | only when applied |
//! | `close` | unfenced or `version` = expected | all eight (`opened_at` = 0) and `v` = 1 | whenever applied |
//!
//! The expiry is `state_ttl` in whole milliseconds, rounded down as the
//! original's `int(ttl * 1000)` does (at least 1). Nothing is published.
//!
//! The two operations the original lacks (issue 21) write only what its
//! own scripts write, so its instances read the result as any other state:
//!
//! | operation | applied when | fields written | `PEXPIRE` |
//! |---|---|---|---|
//! | `restart_stalled_round` | `version` = expected, HALF_OPEN, `probes_remaining` = 0 | those of a begin: `state`, `version`, the five probe counters | when applied |
//! | `restore` | `version` = expected | all eight (the version lifted above both) and `v` = 1, as a trip or close | when applied |
//!
//! And where the original would keep an OPEN whose `opened_at` lies in the
//! server's future forever (a clock stepped back, a foreign writer), a begin
//! clamps it to now (`opened_at` and `version` written). Versions stop at
//! [`SharedState::MAX_VERSION`](interlock::storage::SharedState::MAX_VERSION)
//! (2^50), and a hash above it is refused, as in interlock's own layout.
//!
//! The scripts take interlock's arguments and reply in the shape of its
//! own (a code, the eight fields, an empty notice error), so one set of
//! invocations ([`crate::scripts::Op::invocation_in`]) and one parser
//! ([`crate::scripts::parse`]) serve both layouts. Reading is
//! stricter than the original: a hash with no `state` (which the original
//! reads as CLOSED and overwrites on its next trip), a value that is not a
//! decimal integer (which the original fails on too, in Python or in Lua),
//! an unknown `state` or a schema marker `v` other than 1 make the script
//! fail with an `interlock:` error and write nothing, so the breaker
//! degrades to its local state instead of deciding on data it cannot read.

use std::sync::LazyLock;
use std::time::Duration;

use crate::scripts::{Dialect, Scripts, Sources};

/// The longest TTL written (about 31 years), as interlock's own scripts.
const MAX_TTL_MS: u64 = 1_000_000_000_000;

const PRELUDE: &str = r"
local MAX_EXACT = 9007199254740991
local MAX_VERSION = 1125899906842624
local MAX_U32 = 4294967295

local function fail(what)
  error('interlock: ' .. what .. ' (corrupt or foreign interlock-cb hash)', 0)
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

-- The breaker's hash, or the CLOSED baseline (version 0) when there is no
-- key; anything the original could not use faithfully is refused.
local function load(key)
  local raw = redis.call('HMGET', key, 'state', 'opened_at', 'version', 'probes_permitted',
    'probes_remaining', 'probes_completed', 'probe_failures', 'probe_slows', 'v')
  local s = { state = 'closed', opened_at = 0, version = 0, permitted = 0, remaining = 0,
    completed = 0, failures = 0, slows = 0, exists = false }
  if not raw[1] then
    if redis.call('EXISTS', key) == 1 then
      fail('the hash has no state field')
    end
    return s
  end
  if raw[9] and raw[9] ~= '1' then
    fail('unknown schema marker v')
  end
  local state = raw[1]
  if state ~= 'closed' and state ~= 'open' and state ~= 'half_open' then
    fail('field state is unknown')
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

local function digits(n)
  return string.format('%.0f', n)
end

-- The fence of trip_open and close: '' is unfenced.
local function fenced_out(s, expected)
  return expected ~= '' and tonumber(expected) ~= s.version
end

-- The reply of interlock's own scripts; nothing is published, so the
-- last value (why a notice could not be) is always ''.
local function reply(code, s)
  return { code, s.state, s.opened_at, s.version, s.permitted, s.remaining, s.completed,
    s.failures, s.slows, '' }
end

-- trip_open, close and restore write every field and the schema marker.
local function rewrite(key, s)
  redis.call('HSET', key, 'state', s.state, 'opened_at', digits(s.opened_at),
    'version', digits(s.version), 'probes_permitted', digits(s.permitted),
    'probes_remaining', digits(s.remaining), 'probes_completed', digits(s.completed),
    'probe_failures', digits(s.failures), 'probe_slows', digits(s.slows), 'v', '1')
end

-- A begin and a restarted round write state, version and the counters, as
-- the original's begin does (`opened_at` is kept).
local function new_round(key, s, permitted)
  s.state = 'half_open'
  s.version = bump(s.version)
  s.permitted = tonumber(permitted)
  s.remaining = s.permitted
  s.completed = 0
  s.failures = 0
  s.slows = 0
  redis.call('HSET', key, 'state', 'half_open', 'version', digits(s.version),
    'probes_permitted', digits(s.permitted), 'probes_remaining', digits(s.remaining),
    'probes_completed', '0', 'probe_failures', '0', 'probe_slows', '0')
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

-- The original refreshes the key's lifetime whether or not the round
-- begins. An OPEN that began in the server's future (a clock stepped back,
-- a foreign writer) would never elapse: it is clamped to now, an applied
-- change the original does not make but reads as any other OPEN.
local function begin(key, wait_us, permitted, ttl_ms)
  local s = load(key)
  local code = 0
  if s.state == 'open' then
    local now = now_us()
    if s.opened_at > now then
      s.opened_at = now
      s.version = bump(s.version)
      redis.call('HSET', key, 'opened_at', digits(now), 'version', digits(s.version))
      code = 1
    end
    if now - s.opened_at >= tonumber(wait_us) then
      new_round(key, s, permitted)
      code = 1
    end
  end
  redis.call('PEXPIRE', key, ttl_ms)
  return reply(code, s)
end
";

/// `read`: no arguments.
const READ: &str = r"
return read(KEYS[1])
";

/// `trip_open`: ARGV = (channel, unused), ttl_ms, expected version or ''.
const TRIP: &str = r"
local key = KEYS[1]
local s = load(key)
if fenced_out(s, ARGV[3]) then return reply(0, s) end
local code = 0
if s.state ~= 'open' then
  s = fresh('open', now_us(), bump(s.version))
  rewrite(key, s)
  code = 1
end
redis.call('PEXPIRE', key, ARGV[2])
return reply(code, s)
";

/// `begin_half_open_if_elapsed`: ARGV = (channel, unused), wait_us,
/// permitted, ttl_ms.
const BEGIN: &str = r"
return begin(KEYS[1], ARGV[2], ARGV[3], ARGV[4])
";

/// `lease_probe`: ARGV = (channel, unused), ttl_ms. The lifetime is refreshed even when the
/// lease is denied, as the original does.
const LEASE: &str = r"
local key = KEYS[1]
local s = load(key)
local granted = 0
if s.state == 'half_open' and s.remaining > 0 then
  s.remaining = s.remaining - 1
  s.version = bump(s.version)
  redis.call('HSET', key, 'probes_remaining', digits(s.remaining), 'version', digits(s.version))
  granted = 1
end
redis.call('PEXPIRE', key, ARGV[2])
return reply(granted, s)
";

/// `record_probe`: ARGV = (channel, unused), failure (0/1), slow (0/1),
/// ttl_ms.
const RECORD: &str = r"
local key = KEYS[1]
local s = load(key)
if s.state ~= 'half_open' then return reply(0, s) end
s.completed = add32(s.completed, 1)
s.failures = add32(s.failures, tonumber(ARGV[2]))
s.slows = add32(s.slows, tonumber(ARGV[3]))
s.version = bump(s.version)
redis.call('HSET', key, 'probes_completed', digits(s.completed),
  'probe_failures', digits(s.failures), 'probe_slows', digits(s.slows),
  'version', digits(s.version))
redis.call('PEXPIRE', key, ARGV[4])
return reply(1, s)
";

/// `close`: ARGV = (channel, unused), ttl_ms, expected version or ''.
const CLOSE: &str = r"
local key = KEYS[1]
local s = load(key)
if fenced_out(s, ARGV[3]) then return reply(0, s) end
s = fresh('closed', 0, bump(s.version))
rewrite(key, s)
redis.call('PEXPIRE', key, ARGV[2])
return reply(1, s)
";

/// `restart_stalled_round`: ARGV = (channel, unused), expected version,
/// permitted, ttl_ms.
/// Fenced like `close`, and only over a HALF_OPEN round with no slot left;
/// it writes what the original's begin writes, so the Python instances see
/// a fresh round of the same OPEN period.
const RESTART: &str = r"
local key = KEYS[1]
local s = load(key)
if tonumber(ARGV[2]) ~= s.version or s.state ~= 'half_open' or s.remaining > 0 then
  return reply(0, s)
end
new_round(key, s, ARGV[3])
redis.call('PEXPIRE', key, ARGV[4])
return reply(1, s)
";

/// `restore`: ARGV = (channel, unused), expected version, ttl_ms, then the
/// state to write:
/// state, opened_at_us, version, permitted, remaining, completed, failures,
/// slows. Fenced like `close`; writes every field and the marker, as the
/// original's trip and close do.
const RESTORE: &str = r"
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
rewrite(key, r)
redis.call('PEXPIRE', key, ARGV[3])
return reply(1, r)
";

/// `poll`: a whole batched poll. KEYS = the breakers' hashes; ARGV[1] =
/// (channel, unused), then three values per key: wait_us ('' for a read),
/// permitted, ttl_ms. Replies
/// with one item per key, the nine values of `read` or `begin`, or
/// `{'err', message}` when that key alone failed.
const POLL: &str = r"
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local at = 3 * i - 1
  local ok, r = pcall(function()
    local wait = ARGV[at]
    if wait == '' then return read(key) end
    return begin(key, wait, ARGV[at + 1], ARGV[at + 2])
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

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| {
    Scripts::new(&Sources {
        prelude: PRELUDE,
        read: READ,
        trip: TRIP,
        begin: BEGIN,
        lease: LEASE,
        record: RECORD,
        close: CLOSE,
        restart: RESTART,
        restore: RESTORE,
        poll: POLL,
        changes: None,
    })
});

/// The original's layout: these scripts, TTLs rounded down. They take
/// interlock's arguments, the notice channel included (always empty: they
/// publish nothing).
pub(crate) const DIALECT: Dialect = Dialect {
    scripts: &SCRIPTS,
    ttl_ms,
};

/// The SHA1 digests of the nine scripts, in the order of
/// [`Scripts::digests`].
pub(crate) fn digests() -> [&'static str; 9] {
    let all = SCRIPTS.digests();
    std::array::from_fn(|i| all[i])
}

/// A TTL as whole milliseconds for `PEXPIRE`, rounded down as the
/// original's `int(ttl * 1000)`: at least 1 (a zero would delete the key;
/// the storage settings refuse a TTL under a millisecond anyway), at most
/// [`MAX_TTL_MS`].
pub(crate) fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis())
        .unwrap_or(u64::MAX)
        .clamp(1, MAX_TTL_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_round_down_to_whole_milliseconds_as_the_original() {
        assert_eq!(ttl_ms(Duration::from_secs(300)), 300_000);
        assert_eq!(ttl_ms(Duration::from_micros(1_999)), 1);
        assert_eq!(ttl_ms(Duration::from_micros(2_001)), 2);
        assert_eq!(ttl_ms(Duration::ZERO), 1);
        assert_eq!(ttl_ms(Duration::MAX), MAX_TTL_MS);
    }

    #[test]
    fn the_scripts_differ_from_interlocks_own() {
        let mut all: Vec<&str> = digests().to_vec();
        all.extend(crate::scripts::digests());
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 20);
    }
}
