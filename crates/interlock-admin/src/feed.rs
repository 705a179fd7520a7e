//! [`EventFeed`]: the listener that records what the dashboard draws.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use interlock::{Clock, Event, EventListener, MonotonicClock, State};
use serde::Serialize;
use tokio::sync::broadcast;

use crate::error::BuildError;
use crate::view::LiveView;

/// Most samples kept per breaker, whatever the window and interval.
pub(crate) const MAX_SAMPLES: usize = 10_000;
/// Most events kept per breaker for its timeline.
const MAX_TRACK_EVENTS: usize = 1_000;
/// Most entries of the shared activity log.
const MAX_ACTIVITY: usize = 200;
/// Messages a slow dashboard may fall behind before it is sent a fresh
/// `init` instead.
const CHANNEL_CAPACITY: usize = 1_024;

/// Records breaker events and periodic samples for the dashboard, and
/// streams them to every open page.
///
/// Add a clone to the [`Registry`](interlock::Registry) builder as a
/// listener and give another to [`AdminBuilder::feed`](crate::AdminBuilder::feed):
/// state changes then reach every open dashboard the moment they happen.
/// Only state changes, resets and storage outages are recorded; the
/// per-call events return at once without taking a lock, so the feed costs
/// nothing on the hot path. Failure rates come from the admin's samples.
///
/// It keeps, per breaker, the samples and events of the last
/// [`history`](EventFeedBuilder::history) (5 minutes by default, at most
/// 10,000 samples), plus the last 200 entries of an activity log.
///
/// ```
/// use interlock::{Registry, State};
/// use interlock_admin::EventFeed;
///
/// let feed = EventFeed::new();
/// let registry = Registry::builder().listener(feed.clone()).build()?;
/// registry.get("payments").force_open();
/// assert_eq!(feed.last_state("payments"), Some(State::ForcedOpen));
/// assert_eq!(feed.last_state("search"), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct EventFeed {
    pub(crate) inner: Arc<FeedInner>,
}

pub(crate) struct FeedInner {
    clock: Arc<dyn Clock>,
    window: Duration,
    tx: broadcast::Sender<Arc<Message>>,
    state: Mutex<Tracks>,
}

/// One server-sent event, rendered once for every subscriber.
#[derive(Debug)]
pub(crate) struct Message {
    pub(crate) event: &'static str,
    pub(crate) data: String,
}

#[derive(Default)]
pub(crate) struct Tracks {
    by_name: HashMap<Box<str>, Track>,
    activity: VecDeque<Arc<Entry>>,
}

#[derive(Default)]
struct Track {
    samples: VecDeque<Sample>,
    events: VecDeque<Arc<Entry>>,
    last_state: Option<State>,
}

/// One point of a breaker's timeline.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Sample {
    /// Milliseconds on the feed's clock.
    pub(crate) t: u64,
    pub(crate) state: &'static str,
    pub(crate) failure_rate: f64,
    pub(crate) slow_call_rate: f64,
    pub(crate) calls: u64,
}

/// Something that happened to one breaker.
#[derive(Debug, Serialize)]
pub(crate) struct Entry {
    /// Milliseconds on the feed's clock.
    pub(crate) t: u64,
    pub(crate) breaker: Box<str>,
    /// `state_changed`, `reset`, `storage_degraded`, `storage_recovered` or
    /// `operator`.
    pub(crate) kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) from: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) to: Option<&'static str>,
    /// The operator action (`force_open`, `disable`, `metrics_only`, `reset`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) action: Option<&'static str>,
    /// A storage error's message, or how a change was noticed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) detail: Option<String>,
}

/// The history of one breaker, as `init` sends it.
#[derive(Debug, Default, Serialize)]
pub(crate) struct History {
    pub(crate) samples: Vec<Sample>,
    pub(crate) events: Vec<Arc<Entry>>,
}

impl EventFeed {
    /// A feed on the monotonic clock that keeps 5 minutes of history.
    #[must_use]
    pub fn new() -> Self {
        EventFeed::with_parts(Arc::new(MonotonicClock), Duration::from_secs(300))
    }

    /// A builder, to set the clock or the history window.
    ///
    /// ```
    /// use interlock::ManualClock;
    /// use interlock_admin::EventFeed;
    /// use std::time::Duration;
    ///
    /// let feed = EventFeed::builder()
    ///     .clock(ManualClock::new())
    ///     .history(Duration::from_secs(15 * 60))
    ///     .build()?;
    /// assert_eq!(feed.history(), Duration::from_secs(900));
    /// # Ok::<(), interlock_admin::BuildError>(())
    /// ```
    pub fn builder() -> EventFeedBuilder {
        EventFeedBuilder {
            clock: Arc::new(MonotonicClock),
            window: Duration::from_secs(300),
        }
    }

    /// How far back the timelines reach.
    #[must_use]
    pub fn history(&self) -> Duration {
        self.inner.window
    }

    fn with_parts(clock: Arc<dyn Clock>, window: Duration) -> EventFeed {
        let (tx, _) = broadcast::channel(CHANNEL_CAPACITY);
        EventFeed {
            inner: Arc::new(FeedInner {
                clock,
                window,
                tx,
                state: Mutex::new(Tracks::default()),
            }),
        }
    }

    /// The last state the feed knows for `name` (from its events or the
    /// admin's samples), if it knows the breaker.
    #[must_use]
    pub fn last_state(&self, name: &str) -> Option<State> {
        self.inner.lock().by_name.get(name)?.last_state
    }
}

impl Default for EventFeed {
    fn default() -> Self {
        EventFeed::new()
    }
}

impl fmt::Debug for EventFeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventFeed")
            .field("history", &self.inner.window)
            .field("breakers", &self.inner.lock().by_name.len())
            .field("subscribers", &self.inner.tx.receiver_count())
            .finish_non_exhaustive()
    }
}

impl EventListener for EventFeed {
    fn on_event(&self, event: &Event<'_>) {
        let (breaker, kind, from, to, detail) = match *event {
            Event::StateChanged {
                breaker, from, to, ..
            } => (breaker, "state_changed", Some(from), Some(to), None),
            Event::Reset { breaker, .. } => (breaker, "reset", None, None, None),
            Event::StorageDegraded { breaker, error, .. } => (
                breaker,
                "storage_degraded",
                None,
                None,
                Some(error.to_string()),
            ),
            Event::StorageRecovered { breaker, .. } => {
                (breaker, "storage_recovered", None, None, None)
            }
            // Per-call and pipeline events: nothing to draw, and no lock.
            _ => return,
        };
        let inner = &self.inner;
        let t = inner.now_ms();
        let mut tracks = inner.lock();
        let track = tracks.by_name.entry(breaker.into()).or_default();
        if let Some(to) = to {
            if track.last_state == Some(to) {
                // A sample already saw this change (the listener runs just
                // after the state is published): it is on the timeline.
                return;
            }
            track.last_state = Some(to);
        }
        let entry = Entry {
            t,
            breaker: breaker.into(),
            kind,
            from: from.map(State::as_str),
            to: to.map(State::as_str),
            action: None,
            detail,
        };
        inner.push_entry(&mut tracks, entry);
    }
}

/// Builds an [`EventFeed`]; every check happens in [`build`](Self::build).
#[must_use]
pub struct EventFeedBuilder {
    clock: Arc<dyn Clock>,
    window: Duration,
}

impl fmt::Debug for EventFeedBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventFeedBuilder")
            .field("clock", &self.clock)
            .field("history", &self.window)
            .finish()
    }
}

impl EventFeedBuilder {
    /// The clock that stamps events and samples (default: [`MonotonicClock`]).
    /// The dashboard only shows times relative to this clock's now.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// How far back the timelines reach (default 5 minutes).
    pub fn history(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// Builds the feed.
    ///
    /// # Errors
    ///
    /// [`BuildError::InvalidHistory`] for a window under 1 s or over 24 h.
    pub fn build(self) -> Result<EventFeed, BuildError> {
        if self.window < Duration::from_secs(1) || self.window > Duration::from_secs(24 * 3600) {
            return Err(BuildError::InvalidHistory {
                window: self.window,
            });
        }
        Ok(EventFeed::with_parts(self.clock, self.window))
    }
}

impl FeedInner {
    pub(crate) fn now_ms(&self) -> u64 {
        self.clock.now().as_nanos() / 1_000_000
    }

    pub(crate) fn window(&self) -> Duration {
        self.window
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Tracks> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A receiver of every message sent from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Message>> {
        self.tx.subscribe()
    }

    /// The oldest time still kept, in ms.
    fn horizon(&self, now: u64) -> u64 {
        let window = u64::try_from(self.window.as_millis()).unwrap_or(u64::MAX);
        now.saturating_sub(window)
    }

    /// Records `entry` on its breaker's track and in the activity log, and
    /// broadcasts it. Called with the lock held, so messages go out in the
    /// order the history records them.
    fn push_entry(&self, tracks: &mut Tracks, entry: Entry) {
        let horizon = self.horizon(entry.t);
        let entry = Arc::new(entry);
        let track = tracks.by_name.entry(entry.breaker.clone()).or_default();
        track.events.push_back(Arc::clone(&entry));
        while track.events.len() > MAX_TRACK_EVENTS
            || track.events.front().is_some_and(|e| e.t < horizon)
        {
            track.events.pop_front();
        }
        tracks.activity.push_back(Arc::clone(&entry));
        while tracks.activity.len() > MAX_ACTIVITY {
            tracks.activity.pop_front();
        }
        self.send(
            "event",
            &EventMessage {
                now: entry.t,
                entry: &entry,
            },
        );
    }

    /// Records an operator action and broadcasts it.
    pub(crate) fn record_action(
        &self,
        breaker: &str,
        action: &'static str,
        from: State,
        to: State,
    ) {
        let t = self.now_ms();
        let mut tracks = self.lock();
        let entry = Entry {
            t,
            breaker: breaker.into(),
            kind: "operator",
            from: Some(from.as_str()),
            to: Some(to.as_str()),
            action: Some(action),
            detail: None,
        };
        self.push_entry(&mut tracks, entry);
    }

    /// Takes one sample of every breaker `read` returns, under the feed's
    /// lock so that no event is recorded between the reads and the
    /// broadcast; records a state change the events have not reported yet
    /// (or never will: a feed the registry does not report to).
    pub(crate) fn sample(&self, read: impl FnOnce() -> Vec<LiveView>) {
        let mut tracks = self.lock();
        let t = self.now_ms();
        let horizon = self.horizon(t);
        let views = read();
        for view in &views {
            let state = view.state;
            let track = tracks.by_name.entry(view.name.as_str().into()).or_default();
            let known = track.last_state.map(State::as_str);
            let sample = Sample {
                t,
                state,
                failure_rate: view.failure_rate,
                slow_call_rate: view.slow_call_rate,
                calls: view.snapshot.total_calls,
            };
            // A clock that did not move (a paused or manual clock)
            // replaces the last sample instead of stacking another.
            match track.samples.back_mut() {
                Some(last) if last.t >= t => *last = sample,
                _ => track.samples.push_back(sample),
            }
            while track.samples.len() > MAX_SAMPLES
                || track.samples.front().is_some_and(|s| s.t < horizon)
            {
                track.samples.pop_front();
            }
            match known {
                None => track.last_state = state.parse().ok(),
                Some(known) if known != state => {
                    track.last_state = state.parse().ok();
                    let entry = Entry {
                        t,
                        breaker: view.name.as_str().into(),
                        kind: "state_changed",
                        from: Some(known),
                        to: Some(state),
                        action: None,
                        detail: Some("seen by sampling".to_owned()),
                    };
                    self.push_entry(&mut tracks, entry);
                }
                Some(_) => {}
            }
        }
        self.send(
            "sample",
            &SampleMessage {
                now: t,
                breakers: &views,
            },
        );
    }

    /// The history of `name` (empty if the feed has none).
    pub(crate) fn history_of(tracks: &Tracks, name: &str) -> History {
        tracks
            .by_name
            .get(name)
            .map(|track| History {
                samples: track.samples.iter().copied().collect(),
                events: track.events.iter().cloned().collect(),
            })
            .unwrap_or_default()
    }

    /// The shared activity log, oldest first.
    pub(crate) fn activity(tracks: &Tracks) -> Vec<Arc<Entry>> {
        tracks.activity.iter().cloned().collect()
    }

    fn send(&self, event: &'static str, payload: &impl Serialize) {
        if self.tx.receiver_count() == 0 {
            return;
        }
        match serde_json::to_string(payload) {
            Ok(data) => {
                // No subscriber left in between: nothing to do.
                let _ = self.tx.send(Arc::new(Message { event, data }));
            }
            Err(error) => {
                tracing::error!(target: "interlock_admin", %error, "could not encode a dashboard message");
            }
        }
    }
}

#[derive(Serialize)]
struct EventMessage<'a> {
    now: u64,
    #[serde(flatten)]
    entry: &'a Entry,
}

#[derive(Serialize)]
struct SampleMessage<'a> {
    now: u64,
    breakers: &'a [LiveView],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::SnapshotView;
    use interlock::ManualClock;

    fn live(name: &str, state: State, failed: u64) -> LiveView {
        LiveView {
            name: name.to_owned(),
            state: state.as_str(),
            snapshot: SnapshotView {
                total_calls: 10,
                failed_calls: failed,
                slow_calls: 0,
            },
            failure_rate: failed as f64 / 10.0,
            slow_call_rate: 0.0,
            retry_after_secs: None,
            last_failure: None,
            is_coordinated: false,
            is_degraded: false,
        }
    }

    #[test]
    fn samples_older_than_the_window_are_dropped() {
        let clock = ManualClock::new();
        let feed = EventFeed::builder()
            .clock(clock.clone())
            .history(Duration::from_secs(10))
            .build()
            .unwrap();
        for _ in 0..30 {
            clock.advance(Duration::from_secs(1));
            feed.inner.sample(|| vec![live("a", State::Closed, 1)]);
        }
        let tracks = feed.inner.lock();
        let history = FeedInner::history_of(&tracks, "a");
        assert_eq!(
            history.samples.len(),
            11,
            "the last 10 s, both ends included"
        );
        assert!(history.samples.windows(2).all(|w| w[0].t < w[1].t));
    }

    #[test]
    fn a_frozen_clock_replaces_the_last_sample() {
        let clock = ManualClock::new();
        let feed = EventFeed::builder().clock(clock).build().unwrap();
        feed.inner.sample(|| vec![live("a", State::Closed, 1)]);
        feed.inner.sample(|| vec![live("a", State::Closed, 7)]);
        let tracks = feed.inner.lock();
        let history = FeedInner::history_of(&tracks, "a");
        assert_eq!(history.samples.len(), 1);
        assert_eq!(history.samples[0].failure_rate, 0.7);
    }

    #[test]
    fn sampling_records_changes_no_event_reported_and_events_are_not_doubled() {
        let clock = ManualClock::new();
        let feed = EventFeed::builder().clock(clock.clone()).build().unwrap();
        feed.inner.sample(|| vec![live("a", State::Closed, 0)]);
        clock.advance(Duration::from_secs(1));
        feed.inner.sample(|| vec![live("a", State::Open, 6)]);
        // The listener's event for the same change arrives late.
        feed.on_event(&Event::state_changed("a", State::Closed, State::Open));
        feed.on_event(&Event::state_changed("a", State::Open, State::HalfOpen));
        let tracks = feed.inner.lock();
        let kinds: Vec<_> = FeedInner::history_of(&tracks, "a")
            .events
            .iter()
            .map(|e| (e.from, e.to, e.detail.is_some()))
            .collect();
        assert_eq!(
            kinds,
            [
                (Some("closed"), Some("open"), true),
                (Some("open"), Some("half_open"), false)
            ]
        );
    }

    #[test]
    fn per_call_events_are_ignored() {
        let feed = EventFeed::new();
        feed.on_event(&Event::call_rejected("a", State::Open));
        feed.on_event(&Event::call_recorded(
            "a",
            interlock::Outcome::Failure,
            Duration::ZERO,
        ));
        assert!(feed.inner.lock().by_name.is_empty());
    }

    #[test]
    fn the_activity_log_is_bounded() {
        let feed = EventFeed::new();
        for i in 0..(MAX_ACTIVITY + 50) {
            feed.inner
                .record_action(&format!("b{i}"), "reset", State::Open, State::Closed);
        }
        let tracks = feed.inner.lock();
        let activity = FeedInner::activity(&tracks);
        assert_eq!(activity.len(), MAX_ACTIVITY);
        assert_eq!(&*activity[0].breaker, "b50");
    }

    #[test]
    fn history_window_is_validated() {
        for bad in [
            Duration::ZERO,
            Duration::from_millis(999),
            Duration::from_secs(86_401),
        ] {
            assert!(matches!(
                EventFeed::builder().history(bad).build(),
                Err(BuildError::InvalidHistory { .. })
            ));
        }
    }
}
