//! What both storages share: the key prefix, the knobs and the key layout.

use interlock::ConfigError;
use interlock::storage::{StorageSettings, StorageSettingsBuilder};

use crate::key::{DEFAULT_PREFIX, encode_name_into, validate_prefix};

/// The builder-side options of both storages.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) prefix: String,
    pub(crate) settings: StorageSettingsBuilder,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            prefix: DEFAULT_PREFIX.to_owned(),
            settings: StorageSettings::builder(),
        }
    }
}

impl Options {
    pub(crate) fn build(self) -> Result<Layout, ConfigError> {
        validate_prefix(&self.prefix)?;
        Ok(Layout {
            settings: self.settings.build()?,
            prefix: self.prefix,
        })
    }
}

/// The built, validated options.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    pub(crate) prefix: String,
    pub(crate) settings: StorageSettings,
}

impl Layout {
    pub(crate) fn key(&self, name: &str) -> String {
        let mut key = String::with_capacity(self.prefix.len() + name.len());
        key.push_str(&self.prefix);
        encode_name_into(&mut key, name);
        key
    }
}

/// The knob setters of a storage builder, forwarded to
/// [`StorageSettingsBuilder`] and checked in `build`.
macro_rules! knobs {
    () => {
        /// The prefix of every key (default `interlock:{cb}:`). The part
        /// in braces is the Redis Cluster hash tag that puts all breakers
        /// of the storage in one slot; a prefix without braces spreads them
        /// over the cluster instead. Give each service (or environment) its
        /// own prefix when several share one server.
        ///
        /// `build` rejects a prefix whose `{` does not open a non-empty,
        /// closed hash tag (error naming `key_prefix`).
        pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
            self.options.prefix = prefix.into();
            self
        }

        /// Lifetime of a breaker's hash, refreshed by every applied write
        /// (default 300 s; at least 1 ms). Keep it well above
        /// `wait_duration_in_open`: it also bounds how long a probe slot
        /// leaked by an interrupted probe stalls HALF_OPEN.
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
    };
}

pub(crate) use knobs;
