//! Key layout: `key_prefix` followed by the breaker's name, encoded.

use interlock::ConfigError;

/// The default key prefix. The braces make `cb` the hash tag of every key,
/// so on Redis Cluster all breakers of one storage live in one hash slot.
pub(crate) const DEFAULT_PREFIX: &str = "interlock:{cb}:";

/// Whether a byte of a name is written as `%XX` instead of verbatim.
///
/// `%` keeps the encoding reversible (and so collision-free), braces would
/// let a name open or close a hash tag, and ASCII control bytes would make
/// keys unreadable in `redis-cli` and logs.
fn escaped_ascii(b: u8) -> bool {
    matches!(b, b'%' | b'{' | b'}') || b.is_ascii_control()
}

/// Appends `name` to `out`, percent-encoding `%`, `{`, `}` and every
/// control character (ASCII and Unicode, byte by byte); all other text,
/// non-ASCII letters included, is kept as it is.
pub(crate) fn encode_name_into(out: &mut String, name: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for c in name.chars() {
        let escape = if c.is_ascii() {
            escaped_ascii(c as u8)
        } else {
            c.is_control()
        };
        if escape {
            let mut buf = [0u8; 4];
            for &b in c.encode_utf8(&mut buf).as_bytes() {
                out.push('%');
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0x0f)]));
            }
        } else {
            out.push(c);
        }
    }
}

/// Reverses [`encode_name_into`]: `None` for text it never produces (a `%`
/// not followed by two hex digits, or bytes that are not UTF-8).
pub(crate) fn decode_name(encoded: &[u8]) -> Option<String> {
    fn hex(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'A'..=b'F' => Some(b - b'A' + 10),
            b'a'..=b'f' => Some(b - b'a' + 10),
            _ => None,
        }
    }
    let mut out = Vec::with_capacity(encoded.len());
    let mut rest = encoded;
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let [hi, lo, tail @ ..] = tail else {
                return None;
            };
            out.push(hex(*hi)? << 4 | hex(*lo)?);
            rest = tail;
        } else {
            out.push(b);
            rest = tail;
        }
    }
    String::from_utf8(out).ok()
}

/// Checks a key prefix: if it has a `{`, that brace must open a non-empty
/// hash tag closed inside the prefix, or the slot of a key would depend on
/// the name after all (Redis hashes the whole key when a tag is not closed
/// or empty).
pub(crate) fn validate_prefix(prefix: &str) -> Result<(), ConfigError> {
    let Some(open) = prefix.find('{') else {
        return Ok(());
    };
    match prefix[open + 1..].find('}') {
        Some(0) => Err(ConfigError::new(
            "key_prefix",
            "the hash tag `{}` is empty; Redis Cluster would hash the whole key",
        )),
        Some(_) => Ok(()),
        None => Err(ConfigError::new(
            "key_prefix",
            "a `{` opens a hash tag that the prefix does not close",
        )),
    }
}

/// The hash tag Redis Cluster would hash for `key`, if any.
#[cfg(test)]
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let len = key[open + 1..].find('}')?;
    (len > 0).then(|| &key[open + 1..open + 1 + len])
}

/// (Public as `interlock_redis::inspect::decode_name`; here, next to the
/// encoding, so that the layouts and the inspection both stay above it.)
///
/// The breaker name encoded in the part of a key after its prefix, or
/// `None` if `encoded` is not something the storages write: a malformed or
/// needless `%XX` escape, a raw `{`, `}` or control character, or bytes
/// that are not UTF-8.
///
/// ```
/// use interlock_redis::inspect::decode_name;
///
/// assert_eq!(decode_name("a%7Bb%7D").as_deref(), Some("a{b}"));
/// assert_eq!(decode_name("名前 x").as_deref(), Some("名前 x"));
/// assert_eq!(decode_name("a{b}"), None); // the storages never write a raw brace
/// assert_eq!(decode_name("%41"), None); // nor escape a plain `A`
/// ```
#[must_use]
pub fn decode_canonical_name(encoded: &str) -> Option<String> {
    let name = decode_name(encoded.as_bytes())?;
    // Only the canonical encoding maps back: a key the storages could not
    // have written belongs to someone else.
    let mut again = String::with_capacity(encoded.len());
    encode_name_into(&mut again, &name);
    (again == encoded).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(name: &str) -> String {
        let mut s = String::new();
        encode_name_into(&mut s, name);
        s
    }

    fn decode(s: &str) -> String {
        decode_name(s.as_bytes()).unwrap()
    }

    #[test]
    fn ordinary_names_are_kept_verbatim() {
        for name in [
            "payments",
            "db.primary",
            "a:b/c",
            "with space",
            "名前-ü",
            "",
        ] {
            assert_eq!(encode(name), name);
        }
    }

    #[test]
    fn reserved_and_control_characters_are_percent_encoded() {
        assert_eq!(encode("{x}"), "%7Bx%7D");
        assert_eq!(encode("100%"), "100%25");
        assert_eq!(encode("a\r\nb\0\x7f"), "a%0D%0Ab%00%7F");
        assert_eq!(
            encode("\u{85}"),
            "%C2%85",
            "a Unicode control, byte by byte"
        );
    }

    #[test]
    fn the_encoding_is_reversible_so_distinct_names_never_share_a_key() {
        for name in ["{cb}", "%7B", "%", "%%25", "a\u{85}{}\t", "名{前}"] {
            assert_eq!(decode(&encode(name)), name);
        }
        assert_ne!(encode("%7B"), encode("{"));
    }

    #[test]
    fn text_the_encoding_never_produces_does_not_decode() {
        for bad in [&b"%"[..], b"%4", b"%G0", b"a%zz", b"\xff", b"%FF", b"%C2"] {
            assert_eq!(decode_name(bad), None, "{bad:?}");
        }
        assert_eq!(decode_name(b"a%7bb%7D").as_deref(), Some("a{b}"));
    }

    #[test]
    fn a_name_never_changes_the_hash_tag_of_its_key() {
        for name in ["x}", "{evil}", "}{y}", "{", "a{b}c"] {
            let key = format!("{DEFAULT_PREFIX}{}", encode(name));
            assert_eq!(hash_tag(&key), Some("cb"), "{key}");
            let untagged = format!("plain:{}", encode(name));
            assert_eq!(hash_tag(&untagged), None, "{untagged}");
        }
    }

    #[test]
    fn prefixes_with_an_open_or_empty_tag_are_rejected() {
        for ok in ["", "interlock:cb:", DEFAULT_PREFIX, "{svc}", "a}b", "x{y}{"] {
            assert!(validate_prefix(ok).is_ok(), "{ok}");
        }
        for bad in ["x{", "x{}", "{}{y}", "a{bc"] {
            assert_eq!(validate_prefix(bad).unwrap_err().field(), "key_prefix");
        }
    }
}
