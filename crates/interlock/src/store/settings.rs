//! [`StorageSettings`]: the knobs of a shared storage (R16.12).

use std::time::Duration;

use crate::error::{ConfigError, Shown};

/// How a coordinated breaker uses its storage: key lifetime, polling,
/// degradation backoff and write queue (R16.12).
///
/// ```
/// use interlock::storage::StorageSettings;
/// use std::time::Duration;
///
/// let s = StorageSettings::builder()
///     .poll_interval(Duration::from_millis(500))
///     .retry_backoff_multiplier(2.0)
///     .retry_backoff_max(Duration::from_secs(60))
///     .build()?;
/// assert_eq!(s.state_ttl(), Duration::from_secs(300));
/// assert_eq!(s.retry_delay(0), Duration::from_secs(5));
/// assert_eq!(s.retry_delay(1), Duration::from_secs(10));
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct StorageSettings {
    state_ttl: Duration,
    poll_interval: Duration,
    retry_backoff: Duration,
    retry_backoff_multiplier: f64,
    retry_backoff_max: Option<Duration>,
    retry_jitter: f64,
    write_queue_size: usize,
    notifications: bool,
    batched_polling: bool,
    full_poll_interval: Duration,
}

impl Default for StorageSettings {
    fn default() -> Self {
        StorageSettings {
            state_ttl: Duration::from_secs(300),
            poll_interval: Duration::from_secs(1),
            retry_backoff: Duration::from_secs(5),
            retry_backoff_multiplier: 1.0,
            retry_backoff_max: None,
            retry_jitter: 0.0,
            write_queue_size: 128,
            notifications: true,
            batched_polling: true,
            full_poll_interval: Duration::from_secs(300),
        }
    }
}

impl StorageSettings {
    /// A builder starting from the defaults.
    pub fn builder() -> StorageSettingsBuilder {
        StorageSettingsBuilder {
            settings: StorageSettings::default(),
        }
    }

    /// Lifetime of a breaker's key, refreshed by every write (default 300 s).
    #[must_use]
    pub fn state_ttl(&self) -> Duration {
        self.state_ttl
    }
    /// How often the coordinator refreshes its views (default 1 s).
    #[must_use]
    pub fn poll_interval(&self) -> Duration {
        self.poll_interval
    }
    /// Local-only time after a storage failure (default 5 s).
    #[must_use]
    pub fn retry_backoff(&self) -> Duration {
        self.retry_backoff
    }
    /// Growth of that time per consecutive failure (default 1.0).
    #[must_use]
    pub fn retry_backoff_multiplier(&self) -> f64 {
        self.retry_backoff_multiplier
    }
    /// Cap on the grown time (default none).
    #[must_use]
    pub fn retry_backoff_max(&self) -> Option<Duration> {
        self.retry_backoff_max
    }
    /// Proportional spread added to the delay (default 0.0).
    #[must_use]
    pub fn retry_jitter(&self) -> f64 {
        self.retry_jitter
    }
    /// Pending writes per breaker before new ones are dropped (default 128).
    #[must_use]
    pub fn write_queue_size(&self) -> usize {
        self.write_queue_size
    }

    /// Whether the coordinator subscribes to the storage's change notices
    /// (default on): a change made by another instance then reaches this
    /// one at once instead of at the next poll. Polling stays on either
    /// way and reconciles any notice that was lost. A storage that cannot
    /// push ignores it.
    #[must_use]
    pub fn notifications(&self) -> bool {
        self.notifications
    }
    /// Whether one poll asks the storage about all of the coordinator's
    /// breakers at once, [`Storage::poll_many`](super::Storage::poll_many)
    /// (default on), instead of one request per breaker.
    #[must_use]
    pub fn batched_polling(&self) -> bool {
        self.batched_polling
    }

    /// How often a coordinator whose storage keeps a change index reads
    /// every breaker anyway (default 5 minutes; R17.12): between such full
    /// polls, a batched poll reads only the breakers that changed since the
    /// previous one. The full read is the safety net for changes the index
    /// cannot see: a writer that does not keep it (an older release, an
    /// operator's `DEL`). `Duration::MAX`: only when the index cannot
    /// answer.
    #[must_use]
    pub fn full_poll_interval(&self) -> Duration {
        self.full_poll_interval
    }

    /// How many polls go between two full ones: the full poll interval
    /// over the poll interval, rounded up (at least one).
    pub(crate) fn polls_per_full_poll(&self) -> u64 {
        let polls = self.full_poll_interval.as_nanos() / self.poll_interval.as_nanos().max(1);
        u64::try_from(polls).unwrap_or(u64::MAX).max(1)
    }

    /// The retry delay after the `k`-th consecutive failure, before jitter
    /// (R17.7): `min(retry_backoff × multiplier^k, max)`.
    #[must_use]
    pub fn retry_delay(&self, k: u32) -> Duration {
        let secs = self.retry_backoff.as_secs_f64()
            * self
                .retry_backoff_multiplier
                .powi(i32::try_from(k).unwrap_or(i32::MAX));
        let delay = Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX);
        match self.retry_backoff_max {
            Some(max) => delay.min(max),
            None => delay,
        }
    }

    /// [`retry_delay`](Self::retry_delay) plus deterministic jitter: a
    /// fraction `retry_jitter × u` of the delay, where `u ∈ [0, 1)` is a hash
    /// of the breaker's name, the clock reading and `k` (R17.7), never
    /// process-global randomness.
    #[must_use]
    pub fn retry_delay_with_jitter(&self, k: u32, name: &str, now_nanos: u64) -> Duration {
        let delay = self.retry_delay(k);
        if self.retry_jitter <= 0.0 {
            return delay;
        }
        let u = unit_hash(name, now_nanos, k);
        let extra = delay.as_secs_f64() * self.retry_jitter * u;
        delay.saturating_add(Duration::try_from_secs_f64(extra).unwrap_or(Duration::MAX))
    }
}

/// A value in `[0, 1)` from (name, now, k): FNV-1a then a 64-bit mix.
fn unit_hash(name: &str, now_nanos: u64, k: u32) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name
        .bytes()
        .chain(now_nanos.to_le_bytes())
        .chain(k.to_le_bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Builds [`StorageSettings`]; every check happens in [`build`](Self::build).
#[derive(Clone, Debug)]
#[must_use]
pub struct StorageSettingsBuilder {
    settings: StorageSettings,
}

impl StorageSettingsBuilder {
    /// Key lifetime; at least 1 ms (a shorter TTL would delete the key).
    pub fn state_ttl(mut self, ttl: Duration) -> Self {
        self.settings.state_ttl = ttl;
        self
    }
    /// Poll cadence; not zero.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.settings.poll_interval = interval;
        self
    }
    /// Delay before the first retry after a failure; not zero.
    pub fn retry_backoff(mut self, delay: Duration) -> Self {
        self.settings.retry_backoff = delay;
        self
    }
    /// Growth per consecutive failure; finite and at least 1.0.
    pub fn retry_backoff_multiplier(mut self, multiplier: f64) -> Self {
        self.settings.retry_backoff_multiplier = multiplier;
        self
    }
    /// Cap on the delay; not zero. `None` leaves it uncapped.
    pub fn retry_backoff_max(mut self, max: impl Into<Option<Duration>>) -> Self {
        self.settings.retry_backoff_max = max.into();
        self
    }
    /// Proportional spread; finite and not negative.
    pub fn retry_jitter(mut self, jitter: f64) -> Self {
        self.settings.retry_jitter = jitter;
        self
    }
    /// Pending writes per breaker; at least 1.
    pub fn write_queue_size(mut self, size: usize) -> Self {
        self.settings.write_queue_size = size;
        self
    }

    /// Subscribe to change notices (default `true`); see
    /// [`StorageSettings::notifications`].
    pub fn notifications(mut self, on: bool) -> Self {
        self.settings.notifications = on;
        self
    }
    /// Poll all breakers in one request (default `true`); see
    /// [`StorageSettings::batched_polling`].
    pub fn batched_polling(mut self, on: bool) -> Self {
        self.settings.batched_polling = on;
        self
    }
    /// Read every breaker at least this often even with a change index
    /// (default 5 minutes); see [`StorageSettings::full_poll_interval`].
    pub fn full_poll_interval(mut self, interval: Duration) -> Self {
        self.settings.full_poll_interval = interval;
        self
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first invalid knob.
    pub fn build(self) -> Result<StorageSettings, ConfigError> {
        let s = self.settings;
        if s.state_ttl < Duration::from_millis(1) {
            return Err(ConfigError::new(
                "state_ttl",
                "must be at least 1 ms (a zero TTL would delete the key)",
            ));
        }
        if s.poll_interval.is_zero() {
            return Err(ConfigError::new(
                "poll_interval",
                "must be greater than zero",
            ));
        }
        if s.retry_backoff.is_zero() {
            return Err(ConfigError::new(
                "retry_backoff",
                "must be greater than zero",
            ));
        }
        if !s.retry_backoff_multiplier.is_finite() || s.retry_backoff_multiplier < 1.0 {
            return Err(ConfigError::new(
                "retry_backoff_multiplier",
                format!(
                    "must be a finite number of at least 1.0, got {}",
                    Shown(s.retry_backoff_multiplier)
                ),
            ));
        }
        if s.retry_backoff_max.is_some_and(|m| m.is_zero()) {
            return Err(ConfigError::new(
                "retry_backoff_max",
                "must be greater than zero",
            ));
        }
        if !s.retry_jitter.is_finite() || s.retry_jitter < 0.0 {
            return Err(ConfigError::new(
                "retry_jitter",
                format!(
                    "must be a finite number of at least 0.0, got {}",
                    Shown(s.retry_jitter)
                ),
            ));
        }
        if s.full_poll_interval.is_zero() {
            return Err(ConfigError::new(
                "full_poll_interval",
                "must be greater than zero",
            ));
        }
        if s.write_queue_size == 0 {
            return Err(ConfigError::new("write_queue_size", "must be at least 1"));
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r16_12_defaults_and_validation() {
        let d = StorageSettings::default();
        assert_eq!(d, StorageSettings::builder().build().unwrap());
        assert_eq!(d.poll_interval(), Duration::from_secs(1));
        assert_eq!(d.retry_backoff(), Duration::from_secs(5));
        assert_eq!(d.write_queue_size(), 128);
        assert_eq!(d.full_poll_interval(), Duration::from_secs(300));
        assert_eq!(d.polls_per_full_poll(), 300);
        assert!(d.notifications() && d.batched_polling());
        let off = StorageSettings::builder()
            .notifications(false)
            .batched_polling(false)
            .build()
            .unwrap();
        assert!(!off.notifications() && !off.batched_polling());
        let b = StorageSettings::builder;
        let cases = [
            (b().state_ttl(Duration::from_micros(999)), "state_ttl"),
            (b().poll_interval(Duration::ZERO), "poll_interval"),
            (b().retry_backoff(Duration::ZERO), "retry_backoff"),
            (
                b().retry_backoff_multiplier(0.9),
                "retry_backoff_multiplier",
            ),
            (
                b().retry_backoff_multiplier(f64::NAN),
                "retry_backoff_multiplier",
            ),
            (b().retry_backoff_max(Duration::ZERO), "retry_backoff_max"),
            (b().retry_jitter(-0.1), "retry_jitter"),
            (b().retry_jitter(f64::INFINITY), "retry_jitter"),
            (b().write_queue_size(0), "write_queue_size"),
            (b().full_poll_interval(Duration::ZERO), "full_poll_interval"),
        ];
        for (builder, field) in cases {
            assert_eq!(builder.build().unwrap_err().field(), field);
        }
    }

    #[test]
    fn r17_7_retry_delay_grows_caps_and_jitters_deterministically() {
        let s = StorageSettings::builder()
            .retry_backoff(Duration::from_secs(1))
            .retry_backoff_multiplier(2.0)
            .retry_backoff_max(Duration::from_secs(5))
            .retry_jitter(0.5)
            .build()
            .unwrap();
        let plain: Vec<u64> = (0..5).map(|k| s.retry_delay(k).as_secs()).collect();
        assert_eq!(plain, [1, 2, 4, 5, 5]);
        for k in 0..5 {
            let a = s.retry_delay_with_jitter(k, "db", 42);
            assert_eq!(a, s.retry_delay_with_jitter(k, "db", 42), "deterministic");
            assert!(a >= s.retry_delay(k) && a < s.retry_delay(k).mul_f64(1.5));
        }
        assert_ne!(
            s.retry_delay_with_jitter(0, "db", 42),
            s.retry_delay_with_jitter(0, "db", 43)
        );
    }
}
