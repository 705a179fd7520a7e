//! The registry's published name table, and the hash it is keyed by.
//!
//! A table is built once per publication and then only read, so it is a
//! plain open-addressing array (linear probing, at most half full): a hit is
//! one hash, one or two slot compares and one key comparison, all inline.
//!
//! Slots hold their breakers weakly: the registry's own list owns them, so
//! a table left in some thread's lookup cache keeps no breaker alive after
//! its registry removed it or was dropped.

use std::sync::{Arc, Weak};

use crate::breaker::{CircuitBreaker, Inner};

/// A read-only name → breaker table.
pub(super) struct Table {
    slots: Box<[Option<Slot>]>,
    mask: usize,
    hash: NameHash,
}

struct Slot {
    hash: u64,
    name: Arc<str>,
    breaker: Weak<Inner>,
}

impl Table {
    /// A table without names.
    pub(super) fn empty(hash: NameHash) -> Self {
        Table {
            slots: Box::new([None]),
            mask: 0,
            hash,
        }
    }

    /// A table of `len` entries, whose names are distinct.
    pub(super) fn build<'a>(
        hash: NameHash,
        len: usize,
        entries: impl IntoIterator<Item = (&'a Arc<str>, &'a CircuitBreaker)>,
    ) -> Self {
        let capacity = (len * 2).next_power_of_two().max(1);
        let mut slots: Box<[Option<Slot>]> = (0..capacity).map(|_| None).collect();
        let mask = capacity - 1;
        for (name, breaker) in entries {
            let h = hash.of(name.as_bytes());
            let mut i = index(h, mask);
            while slots[i].is_some() {
                i = (i + 1) & mask;
            }
            slots[i] = Some(Slot {
                hash: h,
                name: Arc::clone(name),
                breaker: Arc::downgrade(&breaker.inner),
            });
        }
        Table { slots, mask, hash }
    }

    /// The breaker named `name`, if the table has it (and it still
    /// exists).
    #[inline]
    pub(super) fn get(&self, name: &str) -> Option<&Weak<Inner>> {
        let name = name.as_bytes();
        let h = self.hash.of(name);
        let mut i = index(h, self.mask);
        // At most half full: the walk always meets an empty slot.
        loop {
            match self.slots.get(i)? {
                None => return None,
                Some(slot) if slot.hash == h && same_bytes(slot.name.as_bytes(), name) => {
                    return Some(&slot.breaker);
                }
                Some(_) => i = (i + 1) & self.mask,
            }
        }
    }
}

/// The slot a hash starts at.
#[inline]
fn index(hash: u64, mask: usize) -> usize {
    // Truncation on 32-bit targets keeps the low bits, which is all the
    // mask wants.
    #[allow(clippy::cast_possible_truncation)]
    let low = hash as usize;
    low & mask
}

/// A fast string hash for breaker names, seeded per registry from std's
/// random keys: a folded 64 × 64 → 128-bit multiply per 16 bytes, with the
/// reads of a short name overlapping instead of looping (the construction of
/// the `foldhash` crate). A host-like name of 25 bytes is two multiplies,
/// where SipHash would spend most of a registry hit. Names come from the
/// application's configuration or from the hosts it calls, not from
/// arbitrary clients; the seed keeps collisions unpredictable all the same,
/// and a collision only costs one more key comparison.
#[derive(Clone, Copy, Debug)]
pub(super) struct NameHash {
    seed: u64,
    fold_seed: u64,
}

impl NameHash {
    /// A hash with fresh random seeds.
    pub(super) fn new() -> Self {
        use std::hash::BuildHasher;
        let keys = std::collections::hash_map::RandomState::new();
        NameHash {
            seed: keys.hash_one(0x5eed_u64),
            // Never zero: a zero multiplier would fold every word to zero.
            fold_seed: keys.hash_one(0xf01d_u64) | 1,
        }
    }

    /// The hash of a name's bytes.
    #[inline]
    pub(super) fn of(&self, bytes: &[u8]) -> u64 {
        let len = bytes.len();
        let mut acc = self.seed.wrapping_add(len as u64);
        let (x, y) = if len <= 16 {
            if len >= 8 {
                (word(bytes, 0), word(bytes, len - 8))
            } else if len >= 4 {
                (half(bytes, 0), half(bytes, len - 4))
            } else {
                (spread(bytes), 0)
            }
        } else {
            let mut at = 0;
            while len - at > 16 {
                acc = fold(word(bytes, at) ^ acc, word(bytes, at + 8) ^ self.fold_seed);
                at += 16;
            }
            (word(bytes, len - 16), word(bytes, len - 8))
        };
        fold(x ^ acc, y ^ self.fold_seed)
    }
}

/// The folded multiply: both halves of the 128-bit product, xored.
#[inline]
fn fold(x: u64, y: u64) -> u64 {
    let product = u128::from(x) * u128::from(y);
    #[allow(clippy::cast_possible_truncation, reason = "the two halves")]
    let (low, high) = (product as u64, (product >> 64) as u64);
    low ^ high
}

/// The 8 bytes at `at`, little-endian (`at + 8 <= bytes.len()`).
#[inline]
fn word(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The 4 bytes at `at`, little-endian (`at + 4 <= bytes.len()`).
#[inline]
fn half(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&bytes[at..at + 4]);
    u64::from(u32::from_le_bytes(w))
}

/// Up to 3 bytes in one word: the first, middle and last (which between them
/// are every byte of such a name); 0 for none.
#[inline]
fn spread(bytes: &[u8]) -> u64 {
    match bytes {
        [] => 0,
        [first, ..] => {
            let len = bytes.len();
            u64::from(*first) << 16 | u64::from(bytes[len / 2]) << 8 | u64::from(bytes[len - 1])
        }
    }
}

/// Whether two names are the same bytes: fixed-size word compares, the last
/// one overlapping, instead of a `memcmp` call.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let len = a.len();
    if len != b.len() {
        return false;
    }
    if len >= 8 {
        let mut at = 0;
        while len - at > 8 {
            if word(a, at) != word(b, at) {
                return false;
            }
            at += 8;
        }
        word(a, len - 8) == word(b, len - 8)
    } else if len >= 4 {
        half(a, 0) == half(b, 0) && half(a, len - 4) == half(b, len - 4)
    } else {
        spread(a) == spread(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length from 0 to 40, and each byte of each changed in turn.
    fn names() -> Vec<Vec<u8>> {
        let text: Vec<u8> = (1..=40u8).map(|b| b.wrapping_mul(37)).collect();
        let mut names = Vec::new();
        for len in 0..=text.len() {
            let name = text[..len].to_vec();
            for at in 0..len {
                let mut changed = name.clone();
                changed[at] ^= 0x20;
                names.push(changed);
            }
            names.push(name);
        }
        names
    }

    #[test]
    fn same_bytes_agrees_with_slice_equality_at_every_length() {
        let names = names();
        for a in &names {
            for b in &names {
                assert_eq!(same_bytes(a, b), a == b, "{a:?} / {b:?}");
            }
        }
    }

    #[test]
    fn distinct_names_hash_apart_and_equal_ones_together() {
        let hash = NameHash::new();
        let names = names();
        let mut seen = std::collections::HashMap::new();
        for name in &names {
            assert_eq!(hash.of(name), hash.of(&name.clone()));
            if let Some(other) = seen.insert(hash.of(name), name) {
                // 861 names in 2^64 values: a collision here is a flaw in
                // the construction, not bad luck.
                panic!("{name:?} and {other:?} collide");
            }
        }
        // Short names that one read covers several ways.
        for (a, b) in [("a", "aa"), ("aa", "aaa"), ("", "\0"), ("ab", "ba")] {
            assert_ne!(
                hash.of(a.as_bytes()),
                hash.of(b.as_bytes()),
                "{a:?} / {b:?}"
            );
        }
    }

    /// The table's own promise: at most half full, every name a hit, an
    /// absent name a miss, and each name a short walk from its home slot.
    #[test]
    fn a_table_is_at_most_half_full_and_its_walks_are_short() {
        let hash = NameHash::new();
        for n in [0usize, 1, 2, 3, 5, 1_000] {
            let entries: Vec<(Arc<str>, CircuitBreaker)> = (0..n)
                .map(|i| {
                    let name = format!("backend-{i:04}.svc.internal");
                    (name.as_str().into(), CircuitBreaker::new(name))
                })
                .collect();
            let table = Table::build(hash, n, entries.iter().map(|(n, b)| (n, b)));
            let capacity = table.slots.len();
            assert!(
                capacity.is_power_of_two() && capacity >= 2 * n,
                "{n}: {capacity}"
            );
            assert_eq!(table.mask, capacity - 1);
            for (name, breaker) in &entries {
                assert!(
                    table
                        .get(name)
                        .is_some_and(|b| std::ptr::eq(b.as_ptr(), Arc::as_ptr(&breaker.inner))),
                    "{name}"
                );
            }
            assert!(table.get("backend-absent").is_none());
            let walks: Vec<usize> = table
                .slots
                .iter()
                .enumerate()
                .filter_map(|(at, slot)| {
                    let home = index(slot.as_ref()?.hash, table.mask);
                    Some(at.wrapping_sub(home) & table.mask)
                })
                .collect();
            assert_eq!(walks.len(), n);
            let total: usize = walks.iter().sum();
            // Linear probing at half load averages half a slot past home;
            // twice that is far out of luck's reach at n = 1,000 (a few
            // names can collide by chance, so small tables are not held to
            // an average).
            if n >= 1_000 {
                assert!(total <= n, "{n} names walk {total} slots past home");
            }
        }
    }

    #[test]
    fn registries_seed_their_hashes_apart() {
        let (a, b) = (NameHash::new(), NameHash::new());
        assert_ne!(a.of(b"payments"), b.of(b"payments"));
    }
}
