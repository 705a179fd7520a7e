//! The compact rows of the live stream: one JSON array per breaker, whose
//! columns `init` names once, so that a thousand breakers fit in a first
//! message of about a hundred kilobytes and a change costs one short row.

use serde::Serialize;
use serde::ser::{SerializeTuple, Serializer};

use crate::view::{Reading, SharedView, millis};

/// The columns of a [`Row`], in order, as `init` announces them.
pub(crate) const COLUMNS: [&str; 13] = [
    "name",
    "state",
    "failure_rate",
    "slow_call_rate",
    "calls",
    "failed_calls",
    "slow_calls",
    "state_since",
    "created_at",
    "retry_at",
    "failure_rate_threshold",
    "degraded",
    "shared",
];

/// The columns of the `shared` column (`null` for a breaker with no shared
/// view).
pub(crate) const SHARED_COLUMNS: [&str; 8] = [
    "state",
    "version",
    "opened_at",
    "probes_permitted",
    "probes_remaining",
    "probes_completed",
    "probe_failures",
    "probe_slows",
];

/// How far an OPEN breaker's `retry_at` may move between two samples and
/// still count as the same deadline: the two clock readings it is made of
/// may each be a coarse tick apart, which must not look like a change.
const RETRY_AT_TOLERANCE_MS: u64 = 100;

/// One breaker as the live stream shows it. Times are milliseconds of the
/// feed's clock; rates are rounded to 0.01 %, so noise below what the page
/// shows is no change.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    pub(crate) name: Box<str>,
    pub(crate) state: &'static str,
    pub(crate) failure_rate: f64,
    pub(crate) slow_call_rate: f64,
    pub(crate) calls: u64,
    pub(crate) failed_calls: u64,
    pub(crate) slow_calls: u64,
    pub(crate) state_since: u64,
    pub(crate) created_at: u64,
    /// When a local OPEN admits a probe again.
    pub(crate) retry_at: Option<u64>,
    pub(crate) failure_rate_threshold: f64,
    pub(crate) degraded: bool,
    pub(crate) shared: Option<SharedView>,
}

/// A rate rounded to four decimals (0.01 %); not finite reads as 0.
pub(crate) fn round_rate(x: f64) -> f64 {
    if x.is_finite() {
        (x * 10_000.0).round() / 10_000.0
    } else {
        0.0
    }
}

impl Row {
    /// The row of `reading`, its times already on the feed's clock;
    /// `previous` keeps a deadline that moved by less than a clock tick.
    pub(crate) fn new(
        reading: &Reading,
        state_since: u64,
        created_at: u64,
        feed_now: u64,
        previous: Option<&Row>,
    ) -> Row {
        let snapshot = reading.snapshot;
        let retry_at = reading.retry_after.map(|d| {
            let at = feed_now.saturating_add(millis(d));
            match previous.and_then(|p| p.retry_at) {
                Some(old) if old.abs_diff(at) <= RETRY_AT_TOLERANCE_MS => old,
                _ => at,
            }
        });
        Row {
            name: reading.name.as_str().into(),
            state: reading.state.as_str(),
            failure_rate: round_rate(snapshot.failure_rate()),
            slow_call_rate: round_rate(snapshot.slow_call_rate()),
            calls: snapshot.total_calls,
            failed_calls: snapshot.failed_calls,
            slow_calls: snapshot.slow_calls,
            state_since,
            created_at,
            retry_at,
            failure_rate_threshold: reading.failure_rate_threshold,
            degraded: reading.degraded,
            shared: reading.shared.as_ref().map(SharedView::from),
        }
    }
}

impl Serialize for Row {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut t = serializer.serialize_tuple(COLUMNS.len())?;
        t.serialize_element(&*self.name)?;
        t.serialize_element(self.state)?;
        t.serialize_element(&self.failure_rate)?;
        t.serialize_element(&self.slow_call_rate)?;
        t.serialize_element(&self.calls)?;
        t.serialize_element(&self.failed_calls)?;
        t.serialize_element(&self.slow_calls)?;
        t.serialize_element(&self.state_since)?;
        t.serialize_element(&self.created_at)?;
        t.serialize_element(&self.retry_at)?;
        t.serialize_element(&self.failure_rate_threshold)?;
        t.serialize_element(&u8::from(self.degraded))?;
        t.serialize_element(&self.shared.as_ref().map(SharedRow))?;
        t.end()
    }
}

/// A [`SharedView`] as an array of [`SHARED_COLUMNS`].
struct SharedRow<'a>(&'a SharedView);

impl Serialize for SharedRow<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let s = self.0;
        let mut t = serializer.serialize_tuple(SHARED_COLUMNS.len())?;
        t.serialize_element(s.state)?;
        t.serialize_element(&s.version)?;
        t.serialize_element(&s.opened_at)?;
        t.serialize_element(&s.probes_permitted)?;
        t.serialize_element(&s.probes_remaining)?;
        t.serialize_element(&s.probes_completed)?;
        t.serialize_element(&s.probe_failures)?;
        t.serialize_element(&s.probe_slows)?;
        t.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use interlock::storage::SharedState;
    use interlock::{Snapshot, State, Timestamp};
    use std::time::Duration;

    fn reading(retry_after: Option<Duration>) -> Reading {
        Reading {
            name: "payments".to_owned(),
            state: State::Open,
            snapshot: Snapshot {
                total_calls: 3,
                failed_calls: 1,
                slow_calls: 0,
            },
            retry_after,
            degraded: false,
            coordinated: true,
            shared: Some(SharedState {
                state: State::Open,
                version: 7,
                ..SharedState::closed()
            }),
            since: Timestamp::from_secs(5),
            created: Timestamp::ZERO,
            now: Timestamp::from_secs(9),
            failure_rate_threshold: 0.5,
        }
    }

    #[test]
    fn a_row_is_an_array_in_column_order_with_rounded_rates() {
        let row = Row::new(&reading(Some(Duration::from_secs(2))), 100, 10, 1_000, None);
        let json = serde_json::to_value(&row).unwrap();
        let cells = json.as_array().unwrap();
        assert_eq!(cells.len(), COLUMNS.len());
        assert_eq!(
            json,
            serde_json::json!([
                "payments",
                "open",
                0.3333,
                0.0,
                3,
                1,
                0,
                100,
                10,
                3_000,
                0.5,
                0,
                ["open", 7, 0, 0, 0, 0, 0, 0]
            ])
        );
        assert_eq!(json[12].as_array().unwrap().len(), SHARED_COLUMNS.len());
    }

    #[test]
    fn a_deadline_that_moved_by_a_tick_is_the_same_deadline() {
        let first = Row::new(&reading(Some(Duration::from_secs(2))), 100, 10, 1_000, None);
        let jitter = Row::new(
            &reading(Some(Duration::from_millis(1_950))),
            100,
            10,
            1_100,
            Some(&first),
        );
        assert_eq!(jitter.retry_at, Some(3_000));
        assert_eq!(jitter, first);
        let later = Row::new(
            &reading(Some(Duration::from_secs(4))),
            100,
            10,
            1_100,
            Some(&first),
        );
        assert_eq!(later.retry_at, Some(5_100), "a new OPEN wait");
        assert!(
            Row::new(&reading(None), 100, 10, 1_000, Some(&first))
                .retry_at
                .is_none()
        );
    }

    #[test]
    fn rates_that_are_not_finite_read_as_zero() {
        assert_eq!(round_rate(f64::NAN), 0.0);
        assert_eq!(round_rate(0.123_456), 0.1235);
    }
}
