//! The epochs a storage's change notices brought (issue 29, R16.15): with
//! the change index, every write script publishes, after its notice, the
//! log entry it wrote (`epoch <epoch>:<mark>:<version>:<key>`), so a
//! subscriber sees every epoch of the storage in order. When the trail
//! holds every epoch since a poll's cursor and those writes are exactly
//! the views the poll would vouch for, the poll only needs the server to
//! confirm that its history agrees (the `confirm` script) instead of the
//! `changes` script over every vouched key.
//!
//! The trail never decides alone: the server checks that the log's top is
//! the trail's last entry, that the cursor's entry is still there, and
//! that no key expired since. A gap in the trail (a notice lost, a write
//! without one, a subscription re-established), an entry of another
//! format or a request the trail cannot answer leaves the poll to
//! `changes`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use interlock::storage::{Epoch, PollRequest};

/// The most entries kept: far more than the writes of one poll interval.
const CAP: usize = 4096;

/// The prefix of the message that carries a write's log entry.
pub(crate) const EPOCH_NOTICE: &[u8] = b"epoch ";

/// One write's log entry, as published.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    epoch: u64,
    mark: u64,
    version: u64,
    key: Vec<u8>,
    member: Vec<u8>,
}

fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 16 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

impl Entry {
    /// `<epoch>:<mark>:<version>:<key>`, as the scripts' `note` writes it.
    fn parse(member: &[u8]) -> Option<Entry> {
        let mut parts = member.splitn(4, |&b| b == b':');
        let epoch = decimal(parts.next()?)?;
        let mark = decimal(parts.next()?)?;
        let version = decimal(parts.next()?)?;
        let key = parts.next()?.to_vec();
        Some(Entry {
            epoch,
            mark,
            version,
            key,
            member: member.to_vec(),
        })
    }
}

/// A contiguous run of epochs, from the live subscriptions of one storage.
#[derive(Debug, Default)]
pub(crate) struct Trail {
    /// Subscriptions established and not ended.
    sessions: usize,
    entries: VecDeque<Entry>,
}

/// What a poll may ask the server to confirm instead of polling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The log's top entry the trail ends with, or `None` when the trail
    /// holds nothing since the cursor (the cursor must be the top).
    pub(crate) top: Option<String>,
    /// The epoch the poll answers at, if the server agrees (its `at` is
    /// the cursor's until the server's time replaces it).
    pub(crate) epoch: Epoch,
}

/// Keeps a subscription counted as live while it is held.
pub(crate) struct Session(Arc<Mutex<Trail>>);

impl Drop for Session {
    fn drop(&mut self) {
        let mut trail = lock(&self.0);
        trail.sessions = trail.sessions.saturating_sub(1);
        if trail.sessions == 0 {
            trail.entries.clear();
        }
    }
}

fn lock(trail: &Mutex<Trail>) -> MutexGuard<'_, Trail> {
    // Every change below leaves the trail whole.
    trail.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Trail {
    /// A subscription of `trail` was established: what came before may
    /// have been missed, so the trail starts afresh.
    pub(crate) fn session(trail: &Arc<Mutex<Trail>>) -> Session {
        let mut t = lock(trail);
        t.sessions += 1;
        t.entries.clear();
        drop(t);
        Session(Arc::clone(trail))
    }

    /// Takes an epoch message's payload (after [`EPOCH_NOTICE`]) in.
    pub(crate) fn push(trail: &Mutex<Trail>, member: &[u8]) {
        lock(trail).take(Entry::parse(member));
    }

    fn take(&mut self, entry: Option<Entry>) {
        let Some(entry) = entry else {
            // Another format: nothing before it can be vouched for.
            self.entries.clear();
            return;
        };
        if let Some(last) = self.entries.back() {
            if entry.epoch == last.epoch + 1 {
                self.entries.push_back(entry);
            } else if entry.epoch <= last.epoch && self.at(entry.epoch).is_some_and(|e| *e == entry)
            {
                // A second subscription of the same storage delivers it
                // again.
            } else {
                self.entries.clear();
                self.entries.push_back(entry);
            }
        } else {
            self.entries.push_back(entry);
        }
        if self.entries.len() > CAP {
            self.entries.pop_front();
        }
    }

    fn at(&self, epoch: u64) -> Option<&Entry> {
        let first = self.entries.front()?.epoch;
        let i = usize::try_from(epoch.checked_sub(first)?).ok()?;
        self.entries.get(i)
    }

    /// What a poll of `requests` from `since` may ask the server to
    /// confirm: only while a subscription is live, when the trail holds
    /// every epoch after the cursor, every [`PollRequest::ReadUnlessAt`]
    /// is the last write of its breaker among them, no
    /// [`PollRequest::ReadIfChanged`] breaker was written among them, and
    /// nothing else is asked. `name_of` turns a key into its breaker's
    /// name (`None`: not one of this storage's).
    pub(crate) fn plan(
        trail: &Mutex<Trail>,
        since: Epoch,
        requests: &[PollRequest<'_>],
        name_of: impl Fn(&[u8]) -> Option<String>,
    ) -> Option<Plan> {
        let t = lock(trail);
        if t.sessions == 0 {
            return None;
        }
        if let Some(own) = t.at(since.counter)
            && own.mark != since.mark
        {
            return None;
        }
        let newer: Vec<&Entry> = t
            .entries
            .iter()
            .filter(|e| e.epoch > since.counter)
            .collect();
        let Some(&last) = newer.last() else {
            return requests
                .iter()
                .all(|r| matches!(r, PollRequest::ReadIfChanged { .. }))
                .then_some(Plan {
                    top: None,
                    epoch: since,
                });
        };
        if newer[0].epoch != since.counter + 1 {
            return None;
        }
        let mut written: HashMap<String, u64> = HashMap::with_capacity(newer.len());
        for e in &newer {
            if let Some(name) = name_of(&e.key) {
                written.insert(name, e.version);
            }
        }
        let agrees = requests.iter().all(|r| match *r {
            PollRequest::ReadIfChanged { name } => !written.contains_key(name),
            PollRequest::ReadUnlessAt { name, version } => written.get(name) == Some(&version),
            _ => false,
        });
        let top = String::from_utf8(last.member.clone()).ok()?;
        agrees.then_some(Plan {
            top: Some(top),
            epoch: Epoch {
                counter: last.epoch,
                mark: last.mark,
                at: since.at,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use interlock::Timestamp;

    const PREFIX: &[u8] = b"p:";

    fn name_of(key: &[u8]) -> Option<String> {
        key.strip_prefix(PREFIX)
            .map(|n| String::from_utf8_lossy(n).into_owned())
    }

    fn member(epoch: u64, version: u64, name: &str) -> Vec<u8> {
        format!("{epoch}:{}:{version}:p:{name}", 1000 + epoch).into_bytes()
    }

    fn cursor(counter: u64) -> Epoch {
        Epoch {
            counter,
            mark: 1000 + counter,
            at: Timestamp::from_nanos(5),
        }
    }

    fn live() -> (Arc<Mutex<Trail>>, Session) {
        let trail = Arc::new(Mutex::new(Trail::default()));
        let session = Trail::session(&trail);
        (trail, session)
    }

    #[test]
    fn a_contiguous_trail_vouches_for_the_last_write_of_each_breaker() {
        let (trail, _s) = live();
        for (e, v, n) in [(4, 1, "a"), (5, 1, "b"), (6, 2, "a"), (7, 1, "x")] {
            Trail::push(&trail, &member(e, v, n));
        }
        let asked = [
            PollRequest::ReadUnlessAt {
                name: "a",
                version: 2,
            },
            PollRequest::ReadUnlessAt {
                name: "b",
                version: 1,
            },
            PollRequest::ReadIfChanged { name: "c" },
        ];
        // a written since, but the poll does not hold it: read it.
        let mut unheld = asked;
        unheld[0] = PollRequest::ReadIfChanged { name: "a" };
        let plan = Trail::plan(&trail, cursor(4), &unheld, name_of);
        assert_eq!(plan, None, "a's write at 6 is not vouched for");
        // A breaker the poll does not ask about at all is not its concern.
        assert!(Trail::plan(&trail, cursor(4), &asked[1..], name_of).is_some());
        let plan = Trail::plan(&trail, cursor(4), &asked, name_of).unwrap();
        assert_eq!(plan.top.as_deref(), Some("7:1007:1:p:x"));
        assert_eq!((plan.epoch.counter, plan.epoch.mark), (7, 1007));
        // From epoch 3 the write at 4 comes first, and a's last is still 2.
        assert!(Trail::plan(&trail, cursor(3), &asked, name_of).is_some());
        // From epoch 2, epoch 3 is missing.
        assert_eq!(Trail::plan(&trail, cursor(2), &asked, name_of), None);
        Trail::push(&trail, &member(3, 9, "z"));
        // Epoch 3 after 7 starts a new run: 4..7 are gone.
        assert_eq!(Trail::plan(&trail, cursor(4), &asked, name_of), None);
    }

    #[test]
    fn a_gap_a_stale_version_or_another_request_is_left_to_the_changes_script() {
        let (trail, _s) = live();
        Trail::push(&trail, &member(4, 1, "a"));
        Trail::push(&trail, &member(6, 1, "b"));
        let b = [PollRequest::ReadUnlessAt {
            name: "b",
            version: 1,
        }];
        assert_eq!(
            Trail::plan(&trail, cursor(4), &b, name_of),
            None,
            "5 missing"
        );
        assert!(Trail::plan(&trail, cursor(5), &b, name_of).is_some());
        let stale = [PollRequest::ReadUnlessAt {
            name: "b",
            version: 0,
        }];
        assert_eq!(Trail::plan(&trail, cursor(5), &stale, name_of), None);
        let changed = [PollRequest::ReadIfChanged { name: "b" }];
        assert_eq!(Trail::plan(&trail, cursor(5), &changed, name_of), None);
        let read = [PollRequest::Read { name: "q" }];
        assert_eq!(Trail::plan(&trail, cursor(6), &read, name_of), None);
        // Nothing since the cursor: only unchanged reads may be confirmed.
        let quiet = [PollRequest::ReadIfChanged { name: "q" }];
        let plan = Trail::plan(&trail, cursor(6), &quiet, name_of).unwrap();
        assert_eq!((plan.top, plan.epoch), (None, cursor(6)));
        // The cursor's own entry under another mark: another history.
        let mut other = cursor(6);
        other.mark += 1;
        assert_eq!(Trail::plan(&trail, other, &quiet, name_of), None);
        // An entry that does not parse clears the trail.
        Trail::push(&trail, b"7:x:1:p:a");
        assert_eq!(Trail::plan(&trail, cursor(5), &b, name_of), None);
    }

    #[test]
    fn only_a_live_subscription_feeds_a_plan() {
        let (trail, session) = live();
        let second = Trail::session(&trail);
        Trail::push(&trail, &member(2, 1, "a"));
        // The second subscription delivers the same entry again.
        Trail::push(&trail, &member(2, 1, "a"));
        Trail::push(&trail, &member(3, 1, "b"));
        let asked = [
            PollRequest::ReadUnlessAt {
                name: "a",
                version: 1,
            },
            PollRequest::ReadUnlessAt {
                name: "b",
                version: 1,
            },
        ];
        assert!(Trail::plan(&trail, cursor(1), &asked, name_of).is_some());
        drop(second);
        assert!(Trail::plan(&trail, cursor(1), &asked, name_of).is_some());
        drop(session);
        assert_eq!(Trail::plan(&trail, cursor(1), &asked, name_of), None);
        let quiet = [PollRequest::ReadIfChanged { name: "q" }];
        assert_eq!(Trail::plan(&trail, cursor(3), &quiet, name_of), None);
    }

    #[test]
    fn the_trail_keeps_its_newest_entries() {
        let (trail, _s) = live();
        for e in 1..=(CAP as u64 + 10) {
            Trail::push(&trail, &member(e, e, "a"));
        }
        let t = lock(&trail);
        assert_eq!(t.entries.len(), CAP);
        assert_eq!(t.entries.front().unwrap().epoch, 11);
    }
}
