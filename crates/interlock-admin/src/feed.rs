//! [`EventFeed`]: the listener that records what the dashboard draws.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use interlock::{Clock, Event, EventListener, MonotonicClock, State};
use serde::Serialize;
use tokio::sync::broadcast;

use crate::error::BuildError;
use crate::row::{COLUMNS, Row, SHARED_COLUMNS};
use crate::tracks::{Entry, History, INIT_ACTIVITY, Tracks};
use crate::view::{Reading, millis};

/// Messages a slow dashboard may fall behind before it is sent a fresh
/// `init` instead.
const CHANNEL_CAPACITY: usize = 1_024;

/// Records breaker events and periodic samples for the dashboard, and
/// streams them to every open page.
///
/// Add a clone to the [`Registry`](interlock::Registry) builder as a
/// listener and give another to [`AdminBuilder::feed`](crate::AdminBuilder::feed):
/// state changes then reach every open dashboard the moment they happen.
/// Only state changes, resets, storage outages and removals are recorded;
/// the per-call events return at once without taking a lock, so the feed
/// costs nothing on the hot path. Failure rates come from the admin's
/// samples, and open dashboards receive only what changed since the last
/// one.
///
/// It keeps, per breaker, a timeline of the last
/// [`history`](EventFeedBuilder::history) (5 minutes by default) that holds
/// one point per change of state or rate (at most 10,000), the breaker's
/// events over the same time, plus the last 200 entries of an activity log.
/// A breaker the registry no longer lists is forgotten at the next sample.
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
    /// Bumped before each listing of the registry (see [`Tracks::sample`]).
    epoch: AtomicU64,
}

/// One server-sent event, rendered once for every subscriber.
#[derive(Debug)]
pub(crate) struct Message {
    pub(crate) event: &'static str,
    pub(crate) data: String,
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
                epoch: AtomicU64::new(0),
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
            // The registry forgot it: its row leaves every page now, not
            // at the next sample.
            Event::BreakerRemoved { breaker, .. } => {
                self.inner.forget(breaker);
                return;
            }
            // Per-call and pipeline events: nothing to draw, and no lock.
            _ => return,
        };
        let inner = &self.inner;
        let t = inner.now_ms();
        let mut tracks = inner.lock();
        let epoch = inner.epoch.load(Ordering::Acquire);
        let track = tracks.track(breaker, epoch);
        if let Some(to) = to {
            if track.last_state == Some(to) {
                // A sample already saw this change (the listener runs just
                // after the state is published): it is on the timeline.
                return;
            }
            track.last_state = Some(to);
        }
        let entry = Entry {
            from: from.map(State::as_str),
            to: to.map(State::as_str),
            detail,
            ..Entry::new(t, breaker, kind)
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

    pub(crate) fn lock(&self) -> MutexGuard<'_, Tracks> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a sample: call before listing the registry, and pass the
    /// epoch to [`sample`](Self::sample) or [`subscribe`](Self::subscribe).
    pub(crate) fn begin_sample(&self) -> u64 {
        self.epoch.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The oldest time still kept, in ms.
    fn horizon(&self, now: u64) -> u64 {
        now.saturating_sub(millis(self.window))
    }

    /// Records `entry` and broadcasts it as an `event`. Called with the
    /// lock held, so messages go out in the order the history records them.
    fn push_entry(&self, tracks: &mut Tracks, entry: Entry) {
        let horizon = self.horizon(entry.t);
        let entry = tracks.push_entry(entry, horizon);
        self.send_entry(&entry);
    }

    fn send_entry(&self, entry: &Entry) {
        self.send(
            "event",
            &EventMessage {
                now: entry.t,
                entry,
            },
        );
    }

    /// Records an operator action and broadcasts it.
    pub(crate) fn record_action(
        &self,
        breaker: &str,
        action: &'static str,
        from: &'static str,
        to: &'static str,
        detail: Option<String>,
    ) {
        let t = self.now_ms();
        let mut tracks = self.lock();
        let entry = Entry {
            from: Some(from),
            to: Some(to),
            action: Some(action),
            detail,
            ..Entry::new(t, breaker, "operator")
        };
        self.push_entry(&mut tracks, entry);
    }

    /// Forgets a breaker the registry removed, and tells every dashboard.
    pub(crate) fn forget(&self, breaker: &str) {
        let t = self.now_ms();
        let mut tracks = self.lock();
        let epoch = self.epoch.load(Ordering::Acquire);
        if let Some(entry) = tracks.forget(breaker, t, epoch) {
            self.send_entry(&entry);
        }
    }

    /// Samples every breaker `read` returns (the registry as listed at
    /// `epoch`), under the feed's lock so that no event is recorded
    /// between the reads and the broadcast (a breaker never reports to its
    /// listeners while its own lock is held, so reading it here cannot
    /// deadlock). Broadcasts state changes the events have not reported
    /// (or never will: a feed the registry does not report to), removals,
    /// then one `delta` with the rows that changed, if any.
    pub(crate) fn sample(&self, epoch: u64, read: impl FnOnce() -> Vec<Reading>) {
        let mut tracks = self.lock();
        let _ = self.sample_locked(&mut tracks, epoch, read);
    }

    fn sample_locked(
        &self,
        tracks: &mut Tracks,
        epoch: u64,
        read: impl FnOnce() -> Vec<Reading>,
    ) -> (u64, Vec<Reading>) {
        let now = self.now_ms();
        let readings = read();
        let sampled = tracks.sample(now, self.horizon(now), epoch, &readings);
        for entry in &sampled.entries {
            self.send_entry(entry);
        }
        if !sampled.changed.is_empty() {
            self.send(
                "delta",
                &Delta {
                    now,
                    changed: &sampled.changed,
                },
            );
        }
        (now, readings)
    }

    /// A fresh sample (broadcast to the dashboards already open), then the
    /// `init` message of a new one and a receiver of everything after it,
    /// all under the feed's lock: nothing is missed or sent twice.
    pub(crate) fn subscribe(
        &self,
        epoch: u64,
        read: impl FnOnce() -> Vec<Reading>,
        header: InitHeader,
    ) -> (broadcast::Receiver<Arc<Message>>, String) {
        let mut tracks = self.lock();
        let (now, readings) = self.sample_locked(&mut tracks, epoch, read);
        let receiver = self.tx.subscribe();
        let rows: Vec<&Row> = readings
            .iter()
            .filter_map(|r| tracks.by_name.get(r.name.as_str())?.row.as_ref())
            .collect();
        let init = Init {
            now,
            history_secs: self.window.as_secs_f64(),
            header,
            columns: &COLUMNS,
            shared_columns: &SHARED_COLUMNS,
            breakers: rows,
            activity: tracks.activity(INIT_ACTIVITY),
        };
        let data = serde_json::to_string(&init).unwrap_or_else(|error| {
            tracing::error!(target: "interlock_admin", %error, "could not encode the dashboard's init message");
            "{}".to_owned()
        });
        drop(tracks);
        (receiver, data)
    }

    /// The history of `name` (empty if the feed has none).
    pub(crate) fn history_of(&self, name: &str) -> History {
        self.lock().history_of(name)
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

/// What `init` says about the admin itself.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct InitHeader {
    pub(crate) sample_interval_secs: f64,
    /// Whether the operator routes exist (a token is configured).
    pub(crate) controls: bool,
    /// Whether the registry is coordinated: the rows carry shared views.
    pub(crate) coordinated: bool,
    /// Whether the fleet-wide routes exist (coordinated, with a token).
    pub(crate) fleet_controls: bool,
}

#[derive(Serialize)]
struct Init<'a> {
    now: u64,
    history_secs: f64,
    #[serde(flatten)]
    header: InitHeader,
    columns: &'a [&'a str],
    shared_columns: &'a [&'a str],
    breakers: Vec<&'a Row>,
    activity: Vec<Arc<Entry>>,
}

#[derive(Serialize)]
struct EventMessage<'a> {
    now: u64,
    #[serde(flatten)]
    entry: &'a Entry,
}

#[derive(Serialize)]
struct Delta<'a> {
    now: u64,
    changed: &'a [Row],
}
