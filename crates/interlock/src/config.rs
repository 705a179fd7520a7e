//! Breaker configuration: thresholds, window, timing and policies.

use std::time::Duration;

use crate::error::{ConfigError, Shown};
use crate::policy::{HalfOpenPolicy, TripPolicy};

/// The exponent of the open-wait backoff stops growing after this many
/// consecutive failed probe rounds (R10.4).
pub const MAX_BACKOFF_ROUNDS: u32 = 64;

/// The largest count window [`ConfigBuilder::build`] accepts: a million
/// calls. The window keeps one byte per call, allocated when the breaker is
/// built, so this bounds it at about 1 MB per breaker.
pub const MAX_COUNT_WINDOW: u32 = 1_000_000;

/// The longest time window [`ConfigBuilder::build`] accepts, in seconds:
/// one day. The window keeps one 12-byte bucket per second, allocated when
/// the breaker is built, so this bounds it at about 1 MB per breaker.
pub const MAX_TIME_WINDOW_SECS: u32 = 86_400;

/// Which sliding window a breaker counts CLOSED outcomes in.
///
/// ```
/// use interlock::SlidingWindow;
/// use std::time::Duration;
///
/// let last_100_calls = SlidingWindow::count(100);
/// let last_30_seconds = SlidingWindow::time(Duration::from_secs(30));
/// assert_eq!(last_100_calls.size(), 100);
/// assert_eq!(last_30_seconds.size(), 30);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SlidingWindow {
    /// The last `n` calls.
    Count(u32),
    /// The calls of the last `n` whole seconds (one bucket per second, so a
    /// call is kept between `n - 1` and `n` seconds).
    Time(u32),
}

impl SlidingWindow {
    /// The last `calls` calls. `0` and more than [`MAX_COUNT_WINDOW`] are
    /// rejected by [`ConfigBuilder::build`].
    #[must_use]
    pub const fn count(calls: u32) -> Self {
        SlidingWindow::Count(calls)
    }

    /// The calls of the last `duration`, in whole seconds. A duration that is
    /// zero, not a whole number of seconds, or longer than
    /// [`MAX_TIME_WINDOW_SECS`] (one day) is rejected by
    /// [`ConfigBuilder::build`].
    #[must_use]
    pub const fn time(duration: Duration) -> Self {
        if duration.subsec_nanos() != 0 || duration.as_secs() > u32::MAX as u64 {
            // An invalid size that `build()` reports by name.
            SlidingWindow::Time(0)
        } else {
            SlidingWindow::Time(duration.as_secs() as u32)
        }
    }

    /// The number of calls (count) or seconds (time).
    #[must_use]
    pub const fn size(&self) -> u32 {
        match *self {
            SlidingWindow::Count(n) | SlidingWindow::Time(n) => n,
        }
    }
}

impl Default for SlidingWindow {
    fn default() -> Self {
        SlidingWindow::Count(100)
    }
}

/// An immutable, validated breaker configuration.
///
/// Build one with [`Config::builder`]; [`Config::default`] has the defaults
/// of the original library.
///
/// ```
/// use interlock::{Config, SlidingWindow};
/// use std::time::Duration;
///
/// let config = Config::builder()
///     .failure_rate_threshold(0.25)
///     .minimum_number_of_calls(20)
///     .sliding_window(SlidingWindow::time(Duration::from_secs(30)))
///     .wait_duration_in_open(Duration::from_secs(10))
///     .build()?;
/// assert_eq!(config.minimum_number_of_calls(), 20);
///
/// let err = Config::builder().failure_rate_threshold(1.5).build().unwrap_err();
/// assert_eq!(err.field(), "failure_rate_threshold");
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub(crate) failure_rate_threshold: f64,
    pub(crate) slow_call_rate_threshold: f64,
    pub(crate) minimum_number_of_calls: u32,
    pub(crate) slow_call_duration_threshold: Duration,
    pub(crate) wait_duration_in_open: Duration,
    pub(crate) wait_duration_backoff_multiplier: f64,
    pub(crate) wait_duration_in_open_max: Option<Duration>,
    /// `None`: follow `wait_duration_in_open`.
    pub(crate) max_wait_in_half_open: Option<Duration>,
    pub(crate) permitted_calls_in_half_open: u32,
    pub(crate) max_concurrent_probes: u32,
    pub(crate) sliding_window: SlidingWindow,
    pub(crate) auto_transition: bool,
    pub(crate) trip_policy: TripPolicy,
    pub(crate) half_open_policy: HalfOpenPolicy,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            failure_rate_threshold: 0.5,
            slow_call_rate_threshold: 1.0,
            minimum_number_of_calls: 10,
            slow_call_duration_threshold: Duration::from_secs(60),
            wait_duration_in_open: Duration::from_secs(60),
            wait_duration_backoff_multiplier: 1.0,
            wait_duration_in_open_max: None,
            max_wait_in_half_open: None,
            permitted_calls_in_half_open: 10,
            max_concurrent_probes: 1,
            sliding_window: SlidingWindow::default(),
            auto_transition: false,
            trip_policy: TripPolicy::default(),
            half_open_policy: HalfOpenPolicy::default(),
        }
    }
}

impl Config {
    /// A builder starting from the defaults.
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder {
            config: Config::default(),
        }
    }

    /// A builder starting from this config, to derive a variant.
    ///
    /// ```
    /// use interlock::Config;
    ///
    /// let base = Config::builder().minimum_number_of_calls(5).build()?;
    /// let strict = base.to_builder().failure_rate_threshold(0.2).build()?;
    /// assert_eq!(strict.minimum_number_of_calls(), 5);
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    pub fn to_builder(&self) -> ConfigBuilder {
        ConfigBuilder {
            config: self.clone(),
        }
    }

    /// Trip when the failure rate reaches this fraction, in `(0, 1]` (default 0.5).
    #[must_use]
    pub fn failure_rate_threshold(&self) -> f64 {
        self.failure_rate_threshold
    }
    /// Trip when the slow-call rate reaches this fraction, in `(0, 1]` (default 1.0).
    #[must_use]
    pub fn slow_call_rate_threshold(&self) -> f64 {
        self.slow_call_rate_threshold
    }
    /// Calls the window must hold before a rate is trusted (default 10).
    #[must_use]
    pub fn minimum_number_of_calls(&self) -> u32 {
        self.minimum_number_of_calls
    }
    /// Calls lasting at least this long are slow (default 60 s).
    #[must_use]
    pub fn slow_call_duration_threshold(&self) -> Duration {
        self.slow_call_duration_threshold
    }
    /// How long the breaker stays OPEN before the first probe (default 60 s).
    #[must_use]
    pub fn wait_duration_in_open(&self) -> Duration {
        self.wait_duration_in_open
    }
    /// Multiplies the open wait after each consecutive failed round (default 1.0).
    #[must_use]
    pub fn wait_duration_backoff_multiplier(&self) -> f64 {
        self.wait_duration_backoff_multiplier
    }
    /// Ceiling of the backed-off wait (default none).
    #[must_use]
    pub fn wait_duration_in_open_max(&self) -> Option<Duration> {
        self.wait_duration_in_open_max
    }
    /// How long a HALF_OPEN round may go with no free probe slot and no
    /// probe admitted or settled before the next call abandons it (ruling
    /// D7): its outstanding probes then count as inconclusive (R9.3, R9.4).
    /// Unless set, it follows [`wait_duration_in_open`](Self::wait_duration_in_open);
    /// `Duration::MAX` means never.
    ///
    /// ```
    /// use interlock::Config;
    /// use std::time::Duration;
    ///
    /// let c = Config::builder().wait_duration_in_open(Duration::from_secs(5)).build()?;
    /// assert_eq!(c.max_wait_in_half_open(), Duration::from_secs(5));
    /// let c = c.to_builder().max_wait_in_half_open(Duration::from_secs(30)).build()?;
    /// assert_eq!(c.max_wait_in_half_open(), Duration::from_secs(30));
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    #[must_use]
    pub fn max_wait_in_half_open(&self) -> Duration {
        self.max_wait_in_half_open
            .unwrap_or(self.wait_duration_in_open)
    }
    /// Probes admitted per HALF_OPEN round (default 10).
    #[must_use]
    pub fn permitted_calls_in_half_open(&self) -> u32 {
        self.permitted_calls_in_half_open
    }
    /// Probes allowed in flight at once (default 1).
    #[must_use]
    pub fn max_concurrent_probes(&self) -> u32 {
        self.max_concurrent_probes
    }
    /// The sliding window (default: the last 100 calls).
    #[must_use]
    pub fn sliding_window(&self) -> SlidingWindow {
        self.sliding_window
    }
    /// Whether a timer moves OPEN to HALF_OPEN without waiting for a call (default false).
    #[must_use]
    pub fn auto_transition(&self) -> bool {
        self.auto_transition
    }
    /// What trips a CLOSED breaker (default: the failure and slow-call rates).
    #[must_use]
    pub fn trip_policy(&self) -> TripPolicy {
        self.trip_policy
    }
    /// What decides a HALF_OPEN round (default: rates over the whole round).
    #[must_use]
    pub fn half_open_policy(&self) -> HalfOpenPolicy {
        self.half_open_policy
    }

    /// The open wait after `failed_rounds` consecutive failed rounds (R10.1):
    /// `min(wait × multiplier^min(n, 64), max)`, saturating at `Duration::MAX`.
    ///
    /// ```
    /// use interlock::Config;
    /// use std::time::Duration;
    ///
    /// let c = Config::builder()
    ///     .wait_duration_in_open(Duration::from_secs(5))
    ///     .wait_duration_backoff_multiplier(2.0)
    ///     .wait_duration_in_open_max(Duration::from_secs(120))
    ///     .build()?;
    /// let waits: Vec<u64> = (0..7).map(|n| c.open_wait(n).as_secs()).collect();
    /// assert_eq!(waits, [5, 10, 20, 40, 80, 120, 120]);
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    #[must_use]
    pub fn open_wait(&self, failed_rounds: u32) -> Duration {
        let base = self.wait_duration_in_open;
        let mult = self.wait_duration_backoff_multiplier;
        let wait = if mult == 1.0 || failed_rounds == 0 {
            base
        } else {
            let exp = failed_rounds.min(MAX_BACKOFF_ROUNDS) as i32;
            let secs = base.as_secs_f64() * mult.powi(exp);
            Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
        };
        match self.wait_duration_in_open_max {
            Some(max) => wait.min(max),
            None => wait,
        }
    }

    /// Whether this config can be coordinated through a storage (R2.4): the
    /// shared OPEN -> HALF_OPEN move always waits `wait_duration_in_open`.
    pub(crate) fn validate_for_storage(&self) -> Result<(), ConfigError> {
        if self.wait_duration_backoff_multiplier != 1.0 {
            return Err(ConfigError::new(
                "wait_duration_backoff_multiplier",
                "must be 1.0 on a breaker coordinated through a storage: the shared \
                 OPEN -> HALF_OPEN move always waits wait_duration_in_open",
            ));
        }
        if matches!(self.half_open_policy, HalfOpenPolicy::Progressive(_)) {
            return Err(ConfigError::new(
                "half_open_policy",
                "progressive recovery is local-only: a breaker coordinated through a storage \
                 shares its probe round with the fleet, which has no stages",
            ));
        }
        Ok(())
    }
}

/// Builds a [`Config`]; every check happens in [`build`](Self::build).
#[derive(Clone, Debug)]
#[must_use]
pub struct ConfigBuilder {
    config: Config,
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, value: $ty) -> Self {
                self.config.$name = value;
                self
            }
        )*
    };
}

impl ConfigBuilder {
    setters! {
        /// Trip when the failure rate reaches this fraction; must be in `(0, 1]`.
        failure_rate_threshold: f64;
        /// Trip when the slow-call rate reaches this fraction; must be in `(0, 1]`.
        slow_call_rate_threshold: f64;
        /// Calls the window must hold before its rates can trip; must be at
        /// least 1 and, for a count window, at most the window size.
        minimum_number_of_calls: u32;
        /// Calls lasting at least this long are slow; must not be zero.
        slow_call_duration_threshold: Duration;
        /// How long to stay OPEN before the first probe; must not be zero.
        wait_duration_in_open: Duration;
        /// Multiplies the open wait after each consecutive failed round; must
        /// be finite, at least 1.0, and keep `wait × multiplier^64` finite.
        wait_duration_backoff_multiplier: f64;
        /// Probes admitted per HALF_OPEN round; must be at least 1.
        permitted_calls_in_half_open: u32;
        /// Probes in flight at once; must be in `[1, permitted_calls_in_half_open]`.
        max_concurrent_probes: u32;
        /// The sliding window; its size must be at least 1 and at most
        /// [`MAX_COUNT_WINDOW`] calls or [`MAX_TIME_WINDOW_SECS`] seconds.
        sliding_window: SlidingWindow;
        /// Move OPEN to HALF_OPEN on a timer instead of on the next call.
        auto_transition: bool;
        /// What trips a CLOSED breaker.
        trip_policy: TripPolicy;
        /// What decides a HALF_OPEN round.
        half_open_policy: HalfOpenPolicy;
    }

    /// Abandons a HALF_OPEN round that has had no free probe slot and no
    /// probe admitted or settled for this long, at the next call's
    /// admission: its outstanding probes count as inconclusive, so the
    /// breaker re-opens once the round's inconclusive probes reach
    /// `permitted_calls_in_half_open` (a failed round for the backoff) and
    /// otherwise goes on with their slots free; their late outcomes are
    /// ignored (ruling D7, R9.4, R8.8). Must not be zero; `Duration::MAX`
    /// never abandons a round. Unless set, it follows
    /// `wait_duration_in_open` (resilience4j's
    /// `maxWaitDurationInHalfOpenState`, on by default here).
    pub fn max_wait_in_half_open(mut self, max: Duration) -> Self {
        self.config.max_wait_in_half_open = Some(max);
        self
    }

    /// Caps the backed-off open wait; must be at least `wait_duration_in_open`.
    /// `None` (the default) leaves it uncapped.
    pub fn wait_duration_in_open_max(mut self, max: impl Into<Option<Duration>>) -> Self {
        self.config.wait_duration_in_open_max = max.into();
        self
    }

    /// Validates and returns the config.
    ///
    /// Checks run in the original's order (R2.1) and the first failing one is
    /// reported; we also reject what can never work (ruling D1): non-finite
    /// numbers, and a `minimum_number_of_calls` larger than a count window.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first invalid field.
    pub fn build(self) -> Result<Config, ConfigError> {
        let c = self.config;
        check_rate("failure_rate_threshold", c.failure_rate_threshold)?;
        check_rate("slow_call_rate_threshold", c.slow_call_rate_threshold)?;
        if c.minimum_number_of_calls == 0 {
            return Err(ConfigError::new(
                "minimum_number_of_calls",
                "must be at least 1, got 0",
            ));
        }
        if c.slow_call_duration_threshold.is_zero() {
            return Err(ConfigError::new(
                "slow_call_duration_threshold",
                "must be greater than zero",
            ));
        }
        if c.wait_duration_in_open.is_zero() {
            return Err(ConfigError::new(
                "wait_duration_in_open",
                "must be greater than zero",
            ));
        }
        let mult = c.wait_duration_backoff_multiplier;
        if mult != 1.0 {
            if !mult.is_finite() || mult < 1.0 {
                return Err(ConfigError::new(
                    "wait_duration_backoff_multiplier",
                    format!(
                        "must be a finite number of at least 1.0, got {}",
                        Shown(mult)
                    ),
                ));
            }
            let peak = c.wait_duration_in_open.as_secs_f64() * mult.powi(MAX_BACKOFF_ROUNDS as i32);
            if !peak.is_finite() {
                return Err(ConfigError::new(
                    "wait_duration_backoff_multiplier",
                    format!(
                        "{} is too large: the wait overflows after {MAX_BACKOFF_ROUNDS} rounds",
                        Shown(mult)
                    ),
                ));
            }
        }
        if let Some(max) = c.wait_duration_in_open_max {
            if max < c.wait_duration_in_open {
                return Err(ConfigError::new(
                    "wait_duration_in_open_max",
                    format!(
                        "must be at least wait_duration_in_open ({:?}), got {max:?}",
                        c.wait_duration_in_open
                    ),
                ));
            }
        }
        if c.max_wait_in_half_open.is_some_and(|max| max.is_zero()) {
            return Err(ConfigError::new(
                "max_wait_in_half_open",
                "must be greater than zero (Duration::MAX never abandons a round)",
            ));
        }
        if c.permitted_calls_in_half_open == 0 {
            return Err(ConfigError::new(
                "permitted_calls_in_half_open",
                "must be at least 1, got 0",
            ));
        }
        if c.max_concurrent_probes == 0 || c.max_concurrent_probes > c.permitted_calls_in_half_open
        {
            return Err(ConfigError::new(
                "max_concurrent_probes",
                format!(
                    "must be in [1, permitted_calls_in_half_open = {}], got {}",
                    c.permitted_calls_in_half_open, c.max_concurrent_probes
                ),
            ));
        }
        match c.sliding_window {
            SlidingWindow::Count(n) if n == 0 || n > MAX_COUNT_WINDOW => {
                return Err(ConfigError::new(
                    "sliding_window",
                    format!(
                        "a count window must hold between 1 and {MAX_COUNT_WINDOW} calls, got {n}"
                    ),
                ));
            }
            SlidingWindow::Time(n) if n == 0 || n > MAX_TIME_WINDOW_SECS => {
                return Err(ConfigError::new(
                    "sliding_window",
                    format!(
                        "a time window must be a whole number of seconds between 1 and \
                         {MAX_TIME_WINDOW_SECS} (one day){}",
                        if n == 0 {
                            String::new()
                        } else {
                            format!(", got {n} s")
                        }
                    ),
                ));
            }
            _ => {}
        }
        if let SlidingWindow::Count(size) = c.sliding_window {
            if c.minimum_number_of_calls > size {
                return Err(ConfigError::new(
                    "minimum_number_of_calls",
                    format!(
                        "{} is larger than the count window ({size} calls): the breaker could never trip",
                        c.minimum_number_of_calls
                    ),
                ));
            }
        }
        c.trip_policy.validate()?;
        c.half_open_policy
            .validate(c.permitted_calls_in_half_open)?;
        Ok(c)
    }
}

fn check_rate(field: &'static str, value: f64) -> Result<(), ConfigError> {
    if value.is_finite() && value > 0.0 && value <= 1.0 {
        Ok(())
    } else {
        Err(ConfigError::new(
            field,
            format!("must be in (0, 1], got {}", Shown(value)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(b: ConfigBuilder) -> &'static str {
        b.build().unwrap_err().field()
    }

    #[test]
    fn r2_defaults_match_the_original() {
        let c = Config::default();
        assert_eq!(c.failure_rate_threshold(), 0.5);
        assert_eq!(c.slow_call_rate_threshold(), 1.0);
        assert_eq!(c.minimum_number_of_calls(), 10);
        assert_eq!(c.slow_call_duration_threshold(), Duration::from_secs(60));
        assert_eq!(c.wait_duration_in_open(), Duration::from_secs(60));
        assert_eq!(c.wait_duration_backoff_multiplier(), 1.0);
        assert_eq!(c.wait_duration_in_open_max(), None);
        assert_eq!(c.permitted_calls_in_half_open(), 10);
        assert_eq!(c.max_concurrent_probes(), 1);
        assert_eq!(c.sliding_window(), SlidingWindow::Count(100));
        assert!(!c.auto_transition());
        assert_eq!(Config::builder().build().unwrap(), c);
    }

    #[test]
    fn r2_every_invalid_field_is_named() {
        let b = Config::builder;
        let cases: Vec<(ConfigBuilder, &str)> = vec![
            (b().failure_rate_threshold(0.0), "failure_rate_threshold"),
            (b().failure_rate_threshold(1.0001), "failure_rate_threshold"),
            (
                b().failure_rate_threshold(f64::NAN),
                "failure_rate_threshold",
            ),
            (b().failure_rate_threshold(-0.5), "failure_rate_threshold"),
            (
                b().slow_call_rate_threshold(0.0),
                "slow_call_rate_threshold",
            ),
            (
                b().slow_call_rate_threshold(f64::INFINITY),
                "slow_call_rate_threshold",
            ),
            (b().minimum_number_of_calls(0), "minimum_number_of_calls"),
            (
                b().slow_call_duration_threshold(Duration::ZERO),
                "slow_call_duration_threshold",
            ),
            (
                b().wait_duration_in_open(Duration::ZERO),
                "wait_duration_in_open",
            ),
            (
                b().wait_duration_backoff_multiplier(0.5),
                "wait_duration_backoff_multiplier",
            ),
            (
                b().wait_duration_backoff_multiplier(f64::NAN),
                "wait_duration_backoff_multiplier",
            ),
            (
                b().wait_duration_backoff_multiplier(f64::INFINITY),
                "wait_duration_backoff_multiplier",
            ),
            (
                b().wait_duration_in_open_max(Duration::from_secs(59)),
                "wait_duration_in_open_max",
            ),
            (
                b().permitted_calls_in_half_open(0),
                "permitted_calls_in_half_open",
            ),
            (b().max_concurrent_probes(0), "max_concurrent_probes"),
            (b().max_concurrent_probes(11), "max_concurrent_probes"),
            (
                b().sliding_window(SlidingWindow::count(0)),
                "sliding_window",
            ),
            (
                b().sliding_window(SlidingWindow::time(Duration::ZERO)),
                "sliding_window",
            ),
            (
                b().sliding_window(SlidingWindow::time(Duration::from_millis(1500))),
                "sliding_window",
            ),
            // Issue 20: absurd windows would abort allocating at build().
            (
                b().sliding_window(SlidingWindow::count(u32::MAX)),
                "sliding_window",
            ),
            (
                b().sliding_window(SlidingWindow::count(MAX_COUNT_WINDOW + 1)),
                "sliding_window",
            ),
            (
                b().sliding_window(SlidingWindow::time(Duration::from_secs(86_401))),
                "sliding_window",
            ),
            (
                b().sliding_window(SlidingWindow::Time(u32::MAX)),
                "sliding_window",
            ),
            (
                b().max_wait_in_half_open(Duration::ZERO),
                "max_wait_in_half_open",
            ),
            // D1: a count window smaller than the minimum could never trip.
            (
                b().minimum_number_of_calls(11)
                    .sliding_window(SlidingWindow::count(10)),
                "minimum_number_of_calls",
            ),
        ];
        for (builder, field) in cases {
            assert_eq!(field_of(builder), field);
        }
    }

    #[test]
    fn r2_1_first_failing_check_in_the_original_order_is_reported() {
        let e = Config::builder()
            .max_concurrent_probes(0)
            .failure_rate_threshold(2.0)
            .minimum_number_of_calls(0)
            .build()
            .unwrap_err();
        assert_eq!(e.field(), "failure_rate_threshold");
        assert!(e.to_string().contains("failure_rate_threshold"), "{e}");
    }

    #[test]
    fn r2_boundaries_are_accepted() {
        Config::builder()
            .failure_rate_threshold(1.0)
            .slow_call_rate_threshold(f64::MIN_POSITIVE)
            .minimum_number_of_calls(100)
            .max_concurrent_probes(10)
            .wait_duration_in_open_max(Duration::from_secs(60))
            .build()
            .unwrap();
        // A time window may be shorter than the minimum (its total is not capped).
        Config::builder()
            .minimum_number_of_calls(1000)
            .sliding_window(SlidingWindow::time(Duration::from_secs(1)))
            .build()
            .unwrap();
    }

    #[test]
    fn window_maxima_are_inclusive_and_named_in_the_error() {
        let count = Config::builder()
            .sliding_window(SlidingWindow::count(MAX_COUNT_WINDOW))
            .build()
            .unwrap();
        assert_eq!(count.sliding_window().size(), 1_000_000);
        let day = Config::builder()
            .sliding_window(SlidingWindow::time(Duration::from_secs(86_400)))
            .build()
            .unwrap();
        assert_eq!(day.sliding_window().size(), MAX_TIME_WINDOW_SECS);
        let e = Config::builder()
            .sliding_window(SlidingWindow::count(u32::MAX))
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("1000000"), "{e}");
        assert!(e.to_string().contains(&u32::MAX.to_string()), "{e}");
        let e = Config::builder()
            .sliding_window(SlidingWindow::time(Duration::from_secs(86_401)))
            .build()
            .unwrap_err();
        assert!(
            e.to_string().contains("86400 (one day), got 86401 s"),
            "{e}"
        );
    }

    #[test]
    fn d7_max_wait_in_half_open_follows_the_open_wait_unless_set() {
        let c = Config::default();
        assert_eq!(c.max_wait_in_half_open(), Duration::from_secs(60));
        let c = c
            .to_builder()
            .wait_duration_in_open(Duration::from_secs(3))
            .build()
            .unwrap();
        assert_eq!(c.max_wait_in_half_open(), Duration::from_secs(3));
        let c = c
            .to_builder()
            .max_wait_in_half_open(Duration::MAX)
            .wait_duration_in_open(Duration::from_secs(9))
            .build()
            .unwrap();
        assert_eq!(c.max_wait_in_half_open(), Duration::MAX, "kept once set");
        assert_ne!(
            c,
            Config::builder()
                .wait_duration_in_open(Duration::from_secs(9))
                .build()
                .unwrap()
        );
    }

    #[test]
    fn r2_3_multiplier_overflow_boundary() {
        let one = Duration::from_secs(1);
        let ok = Config::builder()
            .wait_duration_in_open(one)
            .wait_duration_backoff_multiplier(32768.0);
        ok.build().unwrap();
        let too_big = Config::builder()
            .wait_duration_in_open(one)
            .wait_duration_backoff_multiplier(65536.0);
        let e = too_big.build().unwrap_err();
        assert_eq!(e.field(), "wait_duration_backoff_multiplier");
        assert!(e.to_string().contains("64 rounds"), "{e}");
        let e = Config::builder()
            .wait_duration_in_open(Duration::from_secs(60))
            .wait_duration_backoff_multiplier(1e5)
            .build()
            .unwrap_err();
        assert_eq!(e.field(), "wait_duration_backoff_multiplier");
        // A huge value is named in a few characters, not 309 digits.
        let e = Config::builder()
            .wait_duration_backoff_multiplier(1e308)
            .build()
            .unwrap_err();
        assert_eq!(
            e.reason(),
            "1e308 is too large: the wait overflows after 64 rounds"
        );
        let e = Config::builder()
            .failure_rate_threshold(-3e200)
            .build()
            .unwrap_err();
        assert_eq!(e.reason(), "must be in (0, 1], got -3e200");
    }

    #[test]
    fn r10_open_wait_grows_caps_and_clamps_at_64_rounds() {
        let c = Config::builder()
            .wait_duration_in_open(Duration::from_secs(1))
            .wait_duration_backoff_multiplier(2.0)
            .build()
            .unwrap();
        assert_eq!(c.open_wait(0), Duration::from_secs(1));
        assert_eq!(c.open_wait(1), Duration::from_secs(2));
        assert_eq!(c.open_wait(63), Duration::from_secs(1 << 63));
        // 2^64 s does not fit a Duration: it saturates, and never grows further.
        assert_eq!(c.open_wait(64), Duration::MAX);
        assert_eq!(c.open_wait(1000), c.open_wait(64));
        let constant = Config::default();
        assert_eq!(constant.open_wait(50), Duration::from_secs(60));
    }

    #[test]
    fn time_window_constructor_flags_fractions() {
        assert_eq!(
            SlidingWindow::time(Duration::from_secs(30)),
            SlidingWindow::Time(30)
        );
        assert_eq!(
            SlidingWindow::time(Duration::from_millis(30_500)),
            SlidingWindow::Time(0)
        );
        assert_eq!(SlidingWindow::default().size(), 100);
    }
}
