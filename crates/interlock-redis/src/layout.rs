//! [`Layout`]: which keys, scripts and conventions a storage speaks.

use std::fmt;
use std::str::FromStr;

use crate::key;

/// The Redis layout a storage reads and writes: interlock's own, or the one
/// of the Python library interlock-cb 2.8, so that Rust and Python
/// services can share their breakers during a migration.
///
/// Both keep one hash per breaker with the same fields (`state`,
/// `opened_at` in microseconds of the server's clock, `version`, the five
/// probe counters and the schema marker `v`); they differ in how a key is
/// formed from a name and in what the scripts do beyond the six operations
/// of the storage contract:
///
/// | | [`Interlock`](Layout::Interlock) (default) | [`InterlockCb`](Layout::InterlockCb) |
/// |---|---|---|
/// | default key prefix | `interlock:{cb}:` (a Redis Cluster hash tag) | `interlock:cb:`, the original's |
/// | name in the key | percent-encoded `%`, `{`, `}` and control characters | verbatim, as the original writes it |
/// | change notices | published by every applied write, subscribed to | none: the original neither publishes nor subscribes |
/// | TTL in milliseconds | `state_ttl` rounded up | `state_ttl` rounded down, as the original's `int(ttl * 1000)` |
/// | key lifetime on a no-op begin or a denied lease | unchanged | refreshed, as the original does |
/// | batched polls | one script per 1000 breakers | the same, with the original's semantics per key |
/// | stalled rounds, repairs, a future `opened_at` | restarted, restored, clamped | the same, written with the original's fields (its instances read them as any other state) |
///
/// The scripts of [`InterlockCb`](Layout::InterlockCb) are their own (the
/// original's are not copied); they apply exactly the original's changes to
/// the hash, its fencing and its expiry, so a Rust instance and a Python
/// instance of a service behave as one fleet. The guide
/// `docs/polyglot.md` walks through a migration, with the settings that
/// must match on both sides.
///
/// ```
/// use interlock_redis::{Layout, RedisStorage};
///
/// let client = redis::Client::open("redis://127.0.0.1/")?;
/// let storage = RedisStorage::builder(client).layout(Layout::InterlockCb).build()?;
/// assert_eq!(storage.key_prefix(), "interlock:cb:");
/// assert_eq!(storage.key("db {primary}"), "interlock:cb:db {primary}");
/// assert_eq!("interlock-cb".parse::<Layout>(), Ok(Layout::InterlockCb));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// interlock's own layout: see the [crate docs](crate#key-layout).
    #[default]
    Interlock,
    /// The layout of interlock-cb 2.8 (the Python original's
    /// `RedisStorage` and `AsyncRedisStorage`): keys `key_prefix + name`
    /// with the name verbatim, no change notices.
    InterlockCb,
}

impl Layout {
    /// Every layout, in the order of [`Layout::as_str`]'s documentation.
    pub const ALL: [Layout; 2] = [Layout::Interlock, Layout::InterlockCb];

    /// The key prefix a storage of this layout uses unless told otherwise:
    /// `interlock:{cb}:` or `interlock:cb:`.
    ///
    /// ```
    /// use interlock_redis::Layout;
    ///
    /// assert_eq!(Layout::InterlockCb.default_prefix(), "interlock:cb:");
    /// ```
    #[must_use]
    pub const fn default_prefix(self) -> &'static str {
        match self {
            Layout::Interlock => key::DEFAULT_PREFIX,
            Layout::InterlockCb => INTERLOCK_CB_PREFIX,
        }
    }

    /// The layout's name on command lines and in configuration files:
    /// `interlock` or `interlock-cb`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Layout::Interlock => "interlock",
            Layout::InterlockCb => "interlock-cb",
        }
    }

    /// The SHA1 digests of the layout's scripts, as sent with `EVALSHA`
    /// (for `SCRIPT EXISTS` checks or allow-lists); for interlock's own
    /// layout the same as [`script_digests`](crate::script_digests).
    ///
    /// ```
    /// use interlock_redis::Layout;
    ///
    /// let ours = Layout::Interlock.script_digests();
    /// let original = Layout::InterlockCb.script_digests();
    /// // The same operations; interlock's own layout adds the change poll
    /// // and its short form.
    /// assert_eq!(original.len() + 2, ours.len());
    /// assert!(original.iter().all(|d| d.len() == 40 && !ours.contains(d)));
    /// ```
    #[must_use]
    pub fn script_digests(self) -> Vec<&'static str> {
        match self {
            Layout::Interlock => crate::scripts::digests().to_vec(),
            Layout::InterlockCb => crate::interlock_cb::digests().to_vec(),
        }
    }

    /// The key of `name`'s hash under `prefix`.
    ///
    /// ```
    /// use interlock_redis::Layout;
    ///
    /// assert_eq!(Layout::Interlock.key("p:", "a{b}"), "p:a%7Bb%7D");
    /// assert_eq!(Layout::InterlockCb.key("p:", "a{b}"), "p:a{b}");
    /// ```
    #[must_use]
    pub fn key(self, prefix: &str, name: &str) -> String {
        let mut out = String::with_capacity(prefix.len() + name.len());
        out.push_str(prefix);
        match self {
            Layout::Interlock => key::encode_name_into(&mut out, name),
            Layout::InterlockCb => out.push_str(name),
        }
        out
    }

    /// The breaker name a key's text after its prefix stands for, or
    /// `None` when a storage of this layout cannot have written it
    /// (see [`inspect::decode_name`](crate::inspect::decode_name) for
    /// interlock's; the original's names are any UTF-8 text).
    ///
    /// ```
    /// use interlock_redis::Layout;
    ///
    /// assert_eq!(Layout::Interlock.name_of(b"a%7Bb%7D").as_deref(), Some("a{b}"));
    /// assert_eq!(Layout::Interlock.name_of(b"a{b}"), None);
    /// assert_eq!(Layout::InterlockCb.name_of(b"a{b}").as_deref(), Some("a{b}"));
    /// assert_eq!(Layout::InterlockCb.name_of(b"\xff"), None);
    /// ```
    #[must_use]
    pub fn name_of(self, rest: &[u8]) -> Option<String> {
        let text = std::str::from_utf8(rest).ok()?;
        match self {
            Layout::Interlock => crate::key::decode_canonical_name(text),
            Layout::InterlockCb => Some(text.to_owned()),
        }
    }
}

/// The original's default key prefix.
pub(crate) const INTERLOCK_CB_PREFIX: &str = "interlock:cb:";

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name [`Layout`]'s `FromStr` does not know.
///
/// ```
/// use interlock_redis::Layout;
///
/// let err = "pybreaker".parse::<Layout>().unwrap_err();
/// assert_eq!(err.to_string(), "unknown layout `pybreaker` (expected `interlock` or `interlock-cb`)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownLayout(String);

impl fmt::Display for UnknownLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown layout `{}` (expected `interlock` or `interlock-cb`)",
            self.0
        )
    }
}

impl std::error::Error for UnknownLayout {}

impl FromStr for Layout {
    type Err = UnknownLayout;

    /// `interlock` or `interlock-cb` (also `interlock_cb`), in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        match lower.as_str() {
            "interlock" => Ok(Layout::Interlock),
            "interlock-cb" | "interlock_cb" => Ok(Layout::InterlockCb),
            _ => Err(UnknownLayout(s.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_keys_in_both_layouts() {
        for layout in Layout::ALL {
            for name in ["payments", "db {primary}", "100%", "名前", "a\tb", ""] {
                let key = layout.key("p:", name);
                let rest = key.strip_prefix("p:").unwrap();
                assert_eq!(
                    layout.name_of(rest.as_bytes()).as_deref(),
                    Some(name),
                    "{layout}: {key:?}"
                );
            }
        }
    }

    #[test]
    fn the_original_keeps_names_verbatim() {
        let l = Layout::InterlockCb;
        assert_eq!(l.key(l.default_prefix(), "a%7B{}"), "interlock:cb:a%7B{}");
        assert_eq!(
            Layout::Interlock.key(Layout::Interlock.default_prefix(), "a%7B{}"),
            "interlock:{cb}:a%257B%7B%7D"
        );
    }

    #[test]
    fn layouts_parse_from_their_names() {
        for layout in Layout::ALL {
            assert_eq!(layout.as_str().parse(), Ok(layout));
            assert_eq!(layout.to_string().to_uppercase().parse(), Ok(layout));
        }
        assert_eq!("interlock_cb".parse(), Ok(Layout::InterlockCb));
        assert!("".parse::<Layout>().is_err());
        assert_eq!(Layout::default(), Layout::Interlock);
    }
}
