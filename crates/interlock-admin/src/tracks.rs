//! What the feed keeps per breaker: a change-only timeline since the
//! breaker was created (within the history window), its recent events, and
//! the row dashboards last received, against which the next sample is
//! diffed. Pure bookkeeping: the feed holds its lock around every call and
//! broadcasts what these functions return.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use interlock::{State, Timestamp};
use serde::Serialize;

use crate::row::{Row, round_rate};
use crate::view::Reading;

/// Most samples kept per breaker, whatever the window and interval.
pub(crate) const MAX_SAMPLES: usize = 10_000;
/// Most events kept per breaker for its timeline.
const MAX_TRACK_EVENTS: usize = 1_000;
/// Most entries of the shared activity log.
pub(crate) const MAX_ACTIVITY: usize = 200;
/// Entries of the activity log an `init` carries.
pub(crate) const INIT_ACTIVITY: usize = 100;

/// Every breaker the feed knows, and the activity log.
#[derive(Default)]
pub(crate) struct Tracks {
    pub(crate) by_name: HashMap<Box<str>, Track>,
    activity: VecDeque<Arc<Entry>>,
    /// Names forgotten on a removal event, with the sample epoch then: a
    /// sample that listed the registry before the removal must not bring
    /// them back.
    forgotten: HashMap<Box<str>, u64>,
}

/// One breaker's timeline and last row.
#[derive(Default)]
pub(crate) struct Track {
    /// Change-only: a sample is kept when the state or a rate moved, so an
    /// idle breaker costs one sample; each holds until the next.
    samples: VecDeque<Sample>,
    events: VecDeque<Arc<Entry>>,
    pub(crate) last_state: Option<State>,
    /// The breaker's creation: on its clock, and in ms of the feed's.
    created: Option<(Timestamp, u64)>,
    /// When its current state began: on its clock, and in ms of the feed's
    /// (converted once per state, so the row does not jitter).
    since: Option<(Timestamp, u64)>,
    /// The row dashboards last received.
    pub(crate) row: Option<Row>,
    /// The sample epoch when the feed first heard of it.
    born: u64,
    /// The epoch of the last sample that listed it.
    seen: u64,
}

/// One point of a breaker's timeline: from `t` on, until the next point.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct Sample {
    /// Milliseconds on the feed's clock.
    pub(crate) t: u64,
    pub(crate) state: &'static str,
    pub(crate) failure_rate: f64,
    pub(crate) slow_call_rate: f64,
}

impl Sample {
    fn same_values(&self, other: &Sample) -> bool {
        self.state == other.state
            && self.failure_rate == other.failure_rate
            && self.slow_call_rate == other.slow_call_rate
    }
}

/// Something that happened to one breaker.
#[derive(Debug, Serialize)]
pub(crate) struct Entry {
    /// Milliseconds on the feed's clock.
    pub(crate) t: u64,
    pub(crate) breaker: Box<str>,
    /// `state_changed`, `reset`, `storage_degraded`, `storage_recovered`,
    /// `operator` or `removed`.
    pub(crate) kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) from: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) to: Option<&'static str>,
    /// The operator action (`force_open`, `disable`, `metrics_only`,
    /// `reset`, `fleet_trip`, `fleet_close`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) action: Option<&'static str>,
    /// A storage error's message, how a change was noticed, or the shared
    /// versions of a fleet action.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) detail: Option<String>,
}

impl Entry {
    pub(crate) fn new(t: u64, breaker: &str, kind: &'static str) -> Entry {
        Entry {
            t,
            breaker: breaker.into(),
            kind,
            from: None,
            to: None,
            action: None,
            detail: None,
        }
    }
}

/// The history of one breaker, as `GET /breakers/{name}/history` sends it.
#[derive(Debug, Default, Serialize)]
pub(crate) struct History {
    /// When the breaker was created, in ms of the feed's clock, if the feed
    /// has sampled it: its timeline starts there.
    pub(crate) created_at: Option<u64>,
    pub(crate) samples: Vec<Sample>,
    pub(crate) events: Vec<Arc<Entry>>,
}

/// What one sample changed, for the feed to broadcast in this order.
#[derive(Debug, Default)]
pub(crate) struct Sampled {
    /// Changes of state the events had not reported, and breakers gone
    /// from the registry (`removed`): each an `event` message.
    pub(crate) entries: Vec<Arc<Entry>>,
    /// The rows that differ from what dashboards have: one `delta`.
    pub(crate) changed: Vec<Row>,
}

impl Tracks {
    /// The track of `name`, made (born at `epoch`) if the feed did not know it.
    pub(crate) fn track(&mut self, name: &str, epoch: u64) -> &mut Track {
        self.by_name.entry(name.into()).or_insert_with(|| Track {
            born: epoch,
            seen: epoch,
            ..Track::default()
        })
    }

    /// Records `entry` on its breaker's track (if the feed knows it) and
    /// in the activity log.
    pub(crate) fn push_entry(&mut self, entry: Entry, horizon: u64) -> Arc<Entry> {
        let entry = Arc::new(entry);
        if let Some(track) = self.by_name.get_mut(&*entry.breaker) {
            track.events.push_back(Arc::clone(&entry));
            while track.events.len() > MAX_TRACK_EVENTS
                || track.events.front().is_some_and(|e| e.t < horizon)
            {
                track.events.pop_front();
            }
        }
        self.activity.push_back(Arc::clone(&entry));
        while self.activity.len() > MAX_ACTIVITY {
            self.activity.pop_front();
        }
        entry
    }

    /// Forgets `name` (the registry removed it): its track goes, the
    /// activity log says so. `None` if the feed did not know it.
    pub(crate) fn forget(&mut self, name: &str, t: u64, epoch: u64) -> Option<Arc<Entry>> {
        self.by_name.remove(name)?;
        self.forgotten.insert(name.into(), epoch);
        Some(self.push_entry(Entry::new(t, name, "removed"), 0))
    }

    /// Takes one sample of every breaker in `readings` (the registry as
    /// listed at sample epoch `epoch`), at `now` ms; samples and events
    /// before `horizon` are dropped, except the sample that holds at it.
    pub(crate) fn sample(
        &mut self,
        now: u64,
        horizon: u64,
        epoch: u64,
        readings: &[Reading],
    ) -> Sampled {
        let mut out = Sampled::default();
        self.forgotten.retain(|_, at| *at >= epoch);
        for reading in readings {
            if self.forgotten.contains_key(reading.name.as_str()) {
                continue; // listed before it was removed
            }
            let track = self.track(&reading.name, epoch);
            track.seen = epoch;
            let (row, change) = track.sample(reading, now, horizon);
            if let Some(entry) = change {
                out.entries.push(self.push_entry(entry, horizon));
            }
            if let Some(row) = row {
                out.changed.push(row);
            }
        }
        // Breakers the registry no longer lists (it removed them), if the
        // feed knew them before this listing began.
        let gone: Vec<Box<str>> = self
            .by_name
            .iter()
            .filter(|(_, t)| t.seen < epoch && t.born < epoch)
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            self.by_name.remove(&name);
            out.entries
                .push(self.push_entry(Entry::new(now, &name, "removed"), horizon));
        }
        out
    }

    /// The history of `name` (empty if the feed has none).
    pub(crate) fn history_of(&self, name: &str) -> History {
        self.by_name
            .get(name)
            .map(|track| History {
                created_at: track.created.map(|c| c.1),
                samples: track.samples.iter().copied().collect(),
                events: track.events.iter().cloned().collect(),
            })
            .unwrap_or_default()
    }

    /// The last `n` entries of the activity log, oldest first.
    pub(crate) fn activity(&self, n: usize) -> Vec<Arc<Entry>> {
        let skip = self.activity.len().saturating_sub(n);
        self.activity.iter().skip(skip).cloned().collect()
    }
}

impl Track {
    /// Folds one reading in: the timeline, the state seen, the row. Returns
    /// the row if it changed, and a state change no event reported.
    fn sample(
        &mut self,
        reading: &Reading,
        now: u64,
        horizon: u64,
    ) -> (Option<Row>, Option<Entry>) {
        if self.created.is_some_and(|(at, _)| at != reading.created) {
            // A new breaker under a known name: a new timeline.
            *self = Track {
                born: self.born,
                seen: self.seen,
                ..Track::default()
            };
        }
        let created = *self
            .created
            .get_or_insert_with(|| (reading.created, reading.to_feed_ms(reading.created, now)));
        let since = match self.since {
            Some(since) if since.0 == reading.since => since,
            _ => (reading.since, reading.to_feed_ms(reading.since, now)),
        };
        self.since = Some(since);

        let state = reading.state.as_str();
        let sample = Sample {
            t: now,
            state,
            failure_rate: round_rate(reading.snapshot.failure_rate()),
            slow_call_rate: round_rate(reading.snapshot.slow_call_rate()),
        };
        match self.samples.back_mut() {
            // A clock that did not move (a paused or manual clock).
            Some(last) if last.t >= now => *last = sample,
            Some(last) if last.same_values(&sample) => {}
            _ => self.samples.push_back(sample),
        }
        while self.samples.len() > MAX_SAMPLES
            || (self.samples.len() > 1 && self.samples[1].t <= horizon)
        {
            self.samples.pop_front();
        }

        let change = match self.last_state {
            Some(known) if known != reading.state => Some(Entry {
                from: Some(known.as_str()),
                to: Some(state),
                detail: Some("seen by sampling".to_owned()),
                ..Entry::new(now, &reading.name, "state_changed")
            }),
            _ => None,
        };
        self.last_state = Some(reading.state);

        let row = Row::new(reading, since.1, created.1, now, self.row.as_ref());
        if self.row.as_ref() == Some(&row) {
            return (None, change);
        }
        self.row = Some(row.clone());
        (Some(row), change)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use interlock::Snapshot;

    fn reading(name: &str, state: State, failed: u64, at: u64) -> Reading {
        Reading {
            name: name.to_owned(),
            state,
            snapshot: Snapshot {
                total_calls: 10,
                failed_calls: failed,
                slow_calls: 0,
            },
            retry_after: None,
            degraded: false,
            coordinated: false,
            shared: None,
            since: Timestamp::ZERO,
            created: Timestamp::ZERO,
            now: Timestamp::from_nanos(at * 1_000_000),
            failure_rate_threshold: 0.5,
        }
    }

    fn names(rows: &[Row]) -> Vec<&str> {
        rows.iter().map(|r| &*r.name).collect()
    }

    #[test]
    fn only_changed_rows_are_sent_after_the_first() {
        let mut tracks = Tracks::default();
        let first = tracks.sample(
            1_000,
            0,
            1,
            &[
                reading("a", State::Closed, 0, 1_000),
                reading("b", State::Closed, 0, 1_000),
            ],
        );
        assert_eq!(names(&first.changed), ["a", "b"]);
        let quiet = tracks.sample(
            2_000,
            0,
            2,
            &[
                reading("a", State::Closed, 0, 2_000),
                reading("b", State::Closed, 0, 2_000),
            ],
        );
        assert!(quiet.changed.is_empty() && quiet.entries.is_empty());
        let one = tracks.sample(
            3_000,
            0,
            3,
            &[
                reading("a", State::Closed, 0, 3_000),
                reading("b", State::Closed, 3, 3_000),
            ],
        );
        assert_eq!(names(&one.changed), ["b"]);
        assert_eq!(one.changed[0].failure_rate, 0.3);
    }

    #[test]
    fn the_timeline_keeps_changes_only_and_the_value_at_the_horizon() {
        let mut tracks = Tracks::default();
        for s in 0..30u64 {
            let failed = if (10..12).contains(&s) { 5 } else { 1 };
            let now = s * 1_000;
            let horizon = now.saturating_sub(10_000);
            tracks.sample(
                now,
                horizon,
                s + 1,
                &[reading("a", State::Closed, failed, now)],
            );
        }
        let history = tracks.history_of("a");
        // 1 (from 0 s), 5 (10 s), 1 (12 s): the last holds at the horizon
        // (19 s) and is all that is left.
        assert_eq!(history.samples.len(), 1, "{:?}", history.samples);
        assert_eq!(history.samples[0].t, 12_000);
        assert_eq!(history.samples[0].failure_rate, 0.1);
        assert_eq!(history.created_at, Some(0));
    }

    #[test]
    fn a_frozen_clock_replaces_the_last_sample() {
        let mut tracks = Tracks::default();
        tracks.sample(5, 0, 1, &[reading("a", State::Closed, 1, 5)]);
        tracks.sample(5, 0, 2, &[reading("a", State::Closed, 7, 5)]);
        let history = tracks.history_of("a");
        assert_eq!(history.samples.len(), 1);
        assert_eq!(history.samples[0].failure_rate, 0.7);
    }

    #[test]
    fn a_breaker_the_registry_no_longer_lists_is_removed_once() {
        let mut tracks = Tracks::default();
        tracks.sample(
            0,
            0,
            1,
            &[
                reading("a", State::Closed, 0, 0),
                reading("b", State::Closed, 0, 0),
            ],
        );
        let out = tracks.sample(1_000, 0, 2, &[reading("b", State::Closed, 0, 1_000)]);
        let removed: Vec<_> = out.entries.iter().map(|e| (&*e.breaker, e.kind)).collect();
        assert_eq!(removed, [("a", "removed")]);
        assert!(!tracks.by_name.contains_key("a"));
        let again = tracks.sample(2_000, 0, 3, &[reading("b", State::Closed, 0, 2_000)]);
        assert!(again.entries.is_empty());
    }

    #[test]
    fn a_track_made_by_an_event_during_a_listing_is_not_removed_by_it() {
        let mut tracks = Tracks::default();
        // Sample epoch 5 listed the registry; then a new breaker's first
        // event arrived (the feed's epoch is 5 now), then the sample ran.
        let _ = tracks.track("new", 5);
        let out = tracks.sample(0, 0, 5, &[]);
        assert!(out.entries.is_empty());
        // The next listing does not have it either: removed now.
        let out = tracks.sample(1_000, 0, 6, &[]);
        assert_eq!(out.entries.len(), 1);
    }

    #[test]
    fn a_forgotten_breaker_is_not_brought_back_by_an_older_listing() {
        let mut tracks = Tracks::default();
        tracks.sample(0, 0, 1, &[reading("a", State::Closed, 0, 0)]);
        let entry = tracks.forget("a", 500, 1).unwrap();
        assert_eq!(entry.kind, "removed");
        assert!(tracks.forget("a", 600, 1).is_none(), "once");
        // A sample whose listing began before the removal still has it.
        let stale = tracks.sample(1_000, 0, 1, &[reading("a", State::Closed, 0, 1_000)]);
        assert!(stale.changed.is_empty());
        assert!(!tracks.by_name.contains_key("a"));
        // A later listing that has it: a breaker of that name again.
        let back = tracks.sample(2_000, 0, 2, &[reading("a", State::Closed, 0, 2_000)]);
        assert_eq!(names(&back.changed), ["a"]);
    }

    #[test]
    fn a_new_breaker_under_an_old_name_starts_a_new_timeline() {
        let mut tracks = Tracks::default();
        tracks.sample(0, 0, 1, &[reading("a", State::Closed, 5, 0)]);
        let mut again = reading("a", State::Closed, 0, 9_000);
        again.created = Timestamp::from_secs(8);
        again.since = Timestamp::from_secs(8);
        let out = tracks.sample(9_000, 0, 2, &[again]);
        assert_eq!(out.changed[0].created_at, 8_000);
        let history = tracks.history_of("a");
        assert_eq!(history.samples.len(), 1);
        assert_eq!(history.created_at, Some(8_000));
    }

    #[test]
    fn state_since_is_converted_once_per_state() {
        let mut tracks = Tracks::default();
        let mut r = reading("a", State::Open, 5, 10_000);
        r.since = Timestamp::from_secs(4);
        let first = tracks.sample(10_000, 0, 1, &[r]);
        assert_eq!(first.changed[0].state_since, 4_000);
        // The next reading's clock is 3 ms ahead of the feed's: same row.
        let mut r = reading("a", State::Open, 5, 11_003);
        r.since = Timestamp::from_secs(4);
        assert!(tracks.sample(11_000, 0, 2, &[r]).changed.is_empty());
    }

    #[test]
    fn sampling_reports_a_change_no_event_did() {
        let mut tracks = Tracks::default();
        tracks.sample(0, 0, 1, &[reading("a", State::Closed, 0, 0)]);
        let out = tracks.sample(1_000, 0, 2, &[reading("a", State::Open, 6, 1_000)]);
        let e = &out.entries[0];
        assert_eq!(
            (e.kind, e.from, e.to),
            ("state_changed", Some("closed"), Some("open"))
        );
        assert_eq!(e.detail.as_deref(), Some("seen by sampling"));
        assert_eq!(tracks.history_of("a").events.len(), 1);
    }

    #[test]
    fn the_activity_log_is_bounded_and_init_takes_its_end() {
        let mut tracks = Tracks::default();
        for i in 0..(MAX_ACTIVITY + 50) {
            tracks.push_entry(Entry::new(0, &format!("b{i}"), "reset"), 0);
        }
        let all = tracks.activity(usize::MAX);
        assert_eq!(all.len(), MAX_ACTIVITY);
        assert_eq!(&*all[0].breaker, "b50");
        let last = tracks.activity(INIT_ACTIVITY);
        assert_eq!(last.len(), INIT_ACTIVITY);
        assert_eq!(
            &*last[INIT_ACTIVITY - 1].breaker,
            &*format!("b{}", MAX_ACTIVITY + 49)
        );
    }
}
