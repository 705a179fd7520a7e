//! What both storages share: the layout, the key prefix, the knobs and
//! the scripts of the layout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use interlock::ConfigError;
use interlock::storage::{
    Notice, NoticeSink, PollRequest, StorageSettings, StorageSettingsBuilder,
};
use redis::ScriptInvocation;

use crate::key::validate_prefix;
use crate::layout::Layout;
use crate::notices::{Listener, Subscriber};
use crate::scripts::{Index, Op};
use crate::trail::{Plan, Trail};
use crate::{interlock_cb, scripts};

/// The builder-side options of both storages.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) layout: Layout,
    /// `None`: the layout's default prefix.
    pub(crate) prefix: Option<String>,
    pub(crate) settings: StorageSettingsBuilder,
    /// `notifications` as set on the builder, if it was.
    pub(crate) notifications: Option<bool>,
    pub(crate) subscriber: Option<Subscriber>,
    /// `change_index` as set on the builder (default on).
    pub(crate) change_index: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            layout: Layout::Interlock,
            prefix: None,
            settings: StorageSettings::builder(),
            notifications: None,
            subscriber: None,
            change_index: true,
        }
    }
}

impl Options {
    pub(crate) fn build(self) -> Result<Resolved, ConfigError> {
        let prefix = self
            .prefix
            .unwrap_or_else(|| self.layout.default_prefix().to_owned());
        let mut settings = self.settings;
        match self.layout {
            Layout::Interlock => validate_prefix(&prefix)?,
            // The original takes any prefix (a name's braces decide the
            // slot anyway), and has no change notices.
            Layout::InterlockCb => {
                if self.notifications == Some(true) {
                    return Err(ConfigError::new(
                        "notifications",
                        "the interlock-cb layout has no change notices: the original neither \
                         publishes nor subscribes, so its instances learn of changes by polling",
                    ));
                }
                settings = settings.notifications(false);
            }
        }
        // The index lives under the prefix, so it shares the breakers'
        // slot only when the prefix has a hash tag (validated above); the
        // original's layout has none.
        let index = (self.change_index && self.layout == Layout::Interlock && prefix.contains('{'))
            .then(|| Index::under(&prefix));
        Ok(Resolved {
            layout: self.layout,
            index,
            settings: settings.build()?,
            channel: format!("{prefix}notices"),
            prefix,
            subscriber: self.subscriber,
            reporter: Arc::default(),
            trail: Arc::default(),
        })
    }
}

/// Tells the coordinators of a storage, once, that its change notices
/// cannot be published (R17.11): the first refused `PUBLISH` reaches every
/// sink given to the storage so far, and a sink given later hears of it at
/// once.
#[derive(Debug, Default)]
pub(crate) struct Reporter {
    sinks: Mutex<Vec<NoticeSink>>,
    /// The first refusal, once there was one.
    refused: Mutex<Option<String>>,
    told: AtomicBool,
}

impl Reporter {
    fn keep(&self, sink: &NoticeSink) {
        let refused = self
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(reason) = refused {
            sink.deliver(Notice::Unavailable { reason: &reason });
        }
        let mut sinks = self.sinks.lock().unwrap_or_else(PoisonError::into_inner);
        sinks.retain(NoticeSink::is_alive);
        sinks.push(sink.clone());
    }

    fn refused(&self, why: &str) {
        if self.told.swap(true, Ordering::AcqRel) {
            return;
        }
        let reason = format!("the server refused PUBLISH of the change notices: {why}");
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason.clone());
        let sinks = self
            .sinks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for sink in sinks {
            sink.deliver(Notice::Unavailable { reason: &reason });
        }
    }
}

/// The built, validated options.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub(crate) layout: Layout,
    /// The change index's keys, if this storage keeps one (issue 29).
    pub(crate) index: Option<Index>,
    pub(crate) prefix: String,
    pub(crate) settings: StorageSettings,
    channel: String,
    subscriber: Option<Subscriber>,
    reporter: Arc<Reporter>,
    /// The epochs this storage's subscriptions brought (issue 29).
    pub(crate) trail: Arc<Mutex<Trail>>,
}

impl Resolved {
    /// Keeps a coordinator's sink, to tell it if publishing fails.
    pub(crate) fn keep_sink(&self, sink: &NoticeSink) {
        self.reporter.keep(sink);
    }

    /// A write was applied but its notice refused: say so, once.
    pub(crate) fn publish_failed(&self, why: Option<&str>) {
        if let Some(why) = why {
            self.reporter.refused(why);
        }
    }

    /// The channel the scripts publish on: empty (publish nothing) when
    /// notifications are off.
    pub(crate) fn publish_channel(&self) -> &str {
        if self.settings.notifications() {
            &self.channel
        } else {
            ""
        }
    }

    /// What a subscription delivering to `sink` needs, or `None` when this
    /// storage does not subscribe (notifications off, or no subscriber
    /// client).
    pub(crate) fn listener(&self, sink: NoticeSink) -> Option<Listener> {
        if !self.settings.notifications() {
            return None;
        }
        Some(Listener {
            subscriber: self.subscriber.clone()?,
            channel: self.channel.clone(),
            prefix: self.prefix.clone(),
            settings: self.settings.clone(),
            sink,
            trail: Arc::clone(&self.trail),
        })
    }

    /// Whether this storage can subscribe.
    pub(crate) fn has_subscriber(&self) -> bool {
        self.subscriber.is_some() && self.settings.notifications()
    }

    pub(crate) fn key(&self, name: &str) -> String {
        self.layout.key(&self.prefix, name)
    }

    /// The script call of `op` on `name`'s hash, in this layout.
    pub(crate) fn invocation(&self, op: Op, name: &str) -> ScriptInvocation<'static> {
        let key = self.key(name);
        match self.layout {
            Layout::Interlock => op.invocation_in(
                scripts::INTERLOCK,
                &key,
                self.publish_channel(),
                self.index.as_ref(),
            ),
            Layout::InterlockCb => op.invocation_in(interlock_cb::DIALECT, &key, "", None),
        }
    }

    /// The batched poll script call for `requests`, in this layout.
    pub(crate) fn poll_invocation(
        &self,
        requests: &[PollRequest<'_>],
    ) -> ScriptInvocation<'static> {
        let key = |name: &str| self.key(name);
        match self.layout {
            Layout::Interlock => scripts::poll_invocation(requests, self.publish_channel(), key),
            Layout::InterlockCb => {
                scripts::poll_invocation_in(interlock_cb::DIALECT, requests, "", key)
            }
        }
    }

    /// The `changes` script call over this storage's index: the records
    /// changed since `since`, and an answer to each of `requests`.
    pub(crate) fn changes_invocation(
        &self,
        index: &Index,
        since: Option<interlock::storage::Epoch>,
        requests: &[PollRequest<'_>],
    ) -> ScriptInvocation<'static> {
        scripts::changes_invocation(
            index,
            &self.prefix,
            since,
            scripts::MAX_BATCH,
            requests,
            self.publish_channel(),
            |name| self.key(name),
        )
    }

    /// What a change poll of `requests` from `since` may ask the server to
    /// confirm instead of polling, from what the subscriptions brought.
    pub(crate) fn plan(
        &self,
        since: Option<interlock::storage::Epoch>,
        requests: &[PollRequest<'_>],
    ) -> Option<Plan> {
        let name_of = |key: &[u8]| {
            let rest = key.strip_prefix(self.prefix.as_bytes())?;
            self.layout.name_of(rest)
        };
        Trail::plan(&self.trail, since?, requests, name_of)
    }
}

/// The knob setters of a storage builder, forwarded to
/// [`StorageSettingsBuilder`] and checked in `build`.
macro_rules! knobs {
    () => {
        /// The prefix of every key (default `interlock:{cb}:`, or
        /// `interlock:cb:` with the [interlock-cb layout](Self::layout)).
        /// The part in braces is the Redis Cluster hash tag that puts all
        /// breakers of the storage in one slot; a prefix without braces
        /// spreads them over the cluster instead. Give each service (or
        /// environment) its own prefix when several share one server, with
        /// its own tag (`interlock:{checkout}:`): only the braces pick the
        /// slot, so `checkout:{cb}:` and `search:{cb}:` would share one.
        ///
        /// In interlock's own layout `build` rejects a prefix whose `{`
        /// does not open a non-empty, closed hash tag (error naming
        /// `key_prefix`).
        pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
            self.options.prefix = Some(prefix.into());
            self
        }

        /// The Redis layout to read and write (default
        /// [`Layout::Interlock`](crate::Layout::Interlock)):
        /// [`Layout::InterlockCb`](crate::Layout::InterlockCb) shares the
        /// breakers of services that run the Python original, interlock-cb
        /// 2.8, with its keys, fields, units, expiry and fencing. It also
        /// changes the default [`key_prefix`](Self::key_prefix) to the
        /// original's, `interlock:cb:`, and turns change notices off (the
        /// original has none; `build` refuses `notifications(true)` with
        /// it). Any prefix is accepted with it, as the original accepts any.
        pub fn layout(mut self, layout: crate::Layout) -> Self {
            self.options.layout = layout;
            self
        }

        /// Lifetime of a breaker's hash, refreshed by every applied write
        /// (default 300 s; at least 1 ms). Keep it well above
        /// `wait_duration_in_open`. A key that expires while instances still
        /// poll it is written back by the first to notice.
        pub fn state_ttl(mut self, ttl: Duration) -> Self {
            self.options.settings = self.options.settings.state_ttl(ttl);
            self
        }

        /// How often the coordinator refreshes each breaker's view: the
        /// propagation latency of a trip (default 1 s; not zero).
        pub fn poll_interval(mut self, interval: Duration) -> Self {
            self.options.settings = self.options.settings.poll_interval(interval);
            self
        }

        /// Local-only time after a storage failure (default 5 s; not zero).
        pub fn retry_backoff(mut self, delay: Duration) -> Self {
            self.options.settings = self.options.settings.retry_backoff(delay);
            self
        }

        /// Growth of that time per consecutive failure (default 1.0, a
        /// fixed delay; finite and at least 1.0).
        pub fn retry_backoff_multiplier(mut self, multiplier: f64) -> Self {
            self.options.settings = self.options.settings.retry_backoff_multiplier(multiplier);
            self
        }

        /// Cap on the grown delay (default none; not zero).
        pub fn retry_backoff_max(mut self, max: impl Into<Option<Duration>>) -> Self {
            self.options.settings = self.options.settings.retry_backoff_max(max);
            self
        }

        /// Proportional, deterministic spread added to the delay (default
        /// 0.0; finite and not negative).
        pub fn retry_jitter(mut self, jitter: f64) -> Self {
            self.options.settings = self.options.settings.retry_jitter(jitter);
            self
        }

        /// Pending coordinated writes before new ones are dropped (default
        /// 128; at least 1).
        pub fn write_queue_size(mut self, size: usize) -> Self {
            self.options.settings = self.options.settings.write_queue_size(size);
            self
        }

        /// Push change notices (default on): every applied write also
        /// `PUBLISH`es `<version> <key>` on the channel `<key_prefix>notices`
        /// in the same script, and the coordinator holds one subscription
        /// to it (given a [`subscriber`](Self::subscriber) client), so a
        /// trip reaches the other instances in about a round trip instead
        /// of at their next poll. Polling stays on and reconciles any notice
        /// that is lost.
        ///
        /// Off, the storage neither publishes nor subscribes: for servers
        /// whose ACLs forbid `PUBLISH` or `SUBSCRIBE`, or to keep
        /// propagation at one `poll_interval` by design. Turn it off for the
        /// whole fleet, or instances that keep it on miss the writes of
        /// those that do not until their next poll.
        pub fn notifications(mut self, on: bool) -> Self {
            self.options.notifications = Some(on);
            self.options.settings = self.options.settings.notifications(on);
            self
        }

        /// Answer a coordinator's poll of all its breakers with one script
        /// call, one round trip (default on; at most 1000 breakers per call,
        /// larger polls take one call per thousand). Off, a poll costs one
        /// call per breaker.
        ///
        /// With a [`key_prefix`](Self::key_prefix) without a hash tag the
        /// keys may live in different cluster slots, where one script
        /// cannot reach them all: on a single server batching works as
        /// usual; on Redis Cluster the first batch is refused with
        /// `CROSSSLOT`, answered per breaker instead, and the storage polls
        /// per breaker from then on.
        pub fn batched_polling(mut self, on: bool) -> Self {
            self.options.settings = self.options.settings.batched_polling(on);
            self
        }

        /// Read every breaker at least this often even with the
        /// [change index](Self::change_index) (default 5 minutes): the
        /// safety net for writers that do not keep the index; see
        /// [`StorageSettings::full_poll_interval`](interlock::storage::StorageSettings::full_poll_interval).
        pub fn full_poll_interval(mut self, interval: Duration) -> Self {
            self.options.settings = self.options.settings.full_poll_interval(interval);
            self
        }

        /// Keep a change index (default on; issue 29): every applied write
        /// also bumps an epoch and logs its key in two sorted sets next to
        /// the breakers (`<key_prefix>%changes`, the last 10,000 writes, and
        /// `<key_prefix>%expiry`, when each key's lifetime ends), so a
        /// coordinator's poll reads only the breakers that changed since
        /// its previous poll: an idle poll is a few sorted-set lookups,
        /// whatever the number of breakers. A first poll, a cursor the log
        /// no longer holds (a restart from an old dump, a log trimmed past
        /// it) and a poll after more than 1,000 changes read everything,
        /// as every poll does with the index off.
        ///
        /// Kept only under a prefix with a hash tag (the default's `{cb}`),
        /// so the index shares the breakers' cluster slot; and never in the
        /// [interlock-cb layout](Self::layout), whose instances would not
        /// keep it. Writers that do not keep it (an older release of this
        /// crate during a rolling upgrade) are invisible to the index until
        /// the next [full poll](Self::full_poll_interval) (their notices
        /// still arrive at once): turn it off, or shorten that interval,
        /// while such writers share the prefix.
        pub fn change_index(mut self, on: bool) -> Self {
            self.options.change_index = on;
            self
        }

        /// The client each notice subscription connects with (its own
        /// connection, in RESP2 subscriber mode), and the connect timeout
        /// and response timeout of `SUBSCRIBE` and of the keep-alive `PING`
        /// sent after 15 s of silence. Without one the storage cannot
        /// subscribe and its coordinator relies on polling alone (the
        /// scripts still publish, for the instances that do subscribe).
        ///
        /// On Redis Cluster give a client for any one node: classic pub/sub
        /// messages reach every node.
        pub fn subscriber(mut self, client: redis::Client, timeout: Duration) -> Self {
            self.options.subscriber = Some(crate::notices::Subscriber { client, timeout });
            self
        }
    };
}

pub(crate) use knobs;
