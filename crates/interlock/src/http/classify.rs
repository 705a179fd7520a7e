//! [`HttpStatusClassifier`]: what an HTTP exchange says about the host.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use crate::Verdict;
use crate::pipeline::bulkhead::Full;

/// A predicate over an error (or one of its sources).
type Matcher = Arc<dyn Fn(&(dyn Error + 'static)) -> bool + Send + Sync>;

/// The statuses that count as failures by default: the retryable set of
/// urllib3, AWS and Google clients.
pub const DEFAULT_FAILURE_STATUSES: [u16; 5] = [429, 500, 502, 503, 504];

/// The failure policy every HTTP adapter shares.
///
/// - A response whose status is in the failure set (by default
///   [`DEFAULT_FAILURE_STATUSES`]: 429, 500, 502, 503, 504) is a
///   [`Failure`](Verdict::Failure); any other response is a
///   [`Success`](Verdict::Success), `404` and the permanent `501` and `505`
///   included (the breaker cannot fix a contract error).
/// - An error is a failure, unless it is one of the **excluded** errors,
///   the caller's own bugs (an invalid URL, a request that could not be
///   built): those are deterministic and say nothing about the host, so
///   they count as successes (and are still returned to the caller).
/// - An error that is one of the **inconclusive** errors is
///   [`Inconclusive`](Verdict::Inconclusive): the call never left this
///   process because a local slot was not free (by default a full
///   [`Bulkhead`](crate::pipeline::Bulkhead); add your client's "pool
///   exhausted" error). In HALF_OPEN the probe hands its slot back; in any
///   other state it counts as a failure, since an exhausted pool is usually
///   the host holding connections open.
///
/// Excluded and inconclusive errors are matched against the error and
/// every error in its [`source`](Error::source) chain. Each adapter adds the
/// caller-bug errors of its own client to this policy; both sets and the
/// statuses can be replaced.
///
/// ```
/// use interlock::http::HttpStatusClassifier;
/// use interlock::Verdict;
///
/// let classifier = HttpStatusClassifier::new();
/// assert_eq!(classifier.classify_status(503), Verdict::Failure);
/// assert_eq!(classifier.classify_status(404), Verdict::Success);
/// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
/// assert_eq!(classifier.classify_error(&refused), Verdict::Failure);
///
/// // Also fail on 408, and forgive an error type of your own.
/// #[derive(Debug)]
/// struct MissingCredentials;
/// impl std::fmt::Display for MissingCredentials {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("no credentials for this request")
///     }
/// }
/// impl std::error::Error for MissingCredentials {}
///
/// let classifier = HttpStatusClassifier::new()
///     .failure_statuses([408, 429, 500, 502, 503, 504])
///     .exclude::<MissingCredentials>();
/// assert_eq!(classifier.classify_status(408), Verdict::Failure);
/// assert_eq!(classifier.classify_error(&MissingCredentials), Verdict::Success);
/// ```
#[derive(Clone)]
pub struct HttpStatusClassifier {
    /// One bit per status code 0..1024.
    failure_statuses: [u64; 16],
    excluded: Arc<Vec<(&'static str, Matcher)>>,
    inconclusive: Arc<Vec<(&'static str, Matcher)>>,
}

impl Default for HttpStatusClassifier {
    fn default() -> Self {
        HttpStatusClassifier::new()
    }
}

impl HttpStatusClassifier {
    /// The default policy: [`DEFAULT_FAILURE_STATUSES`] and every error
    /// are failures, nothing is excluded, a full
    /// [`Bulkhead`](crate::pipeline::Bulkhead) is inconclusive.
    #[must_use]
    pub fn new() -> Self {
        HttpStatusClassifier {
            failure_statuses: [0; 16],
            excluded: Arc::new(Vec::new()),
            inconclusive: Arc::new(Vec::new()),
        }
        .failure_statuses(DEFAULT_FAILURE_STATUSES)
        .inconclusive::<Full>()
    }

    /// Replaces the failure statuses (codes above 1023 are ignored: no
    /// HTTP status is that large).
    #[must_use]
    pub fn failure_statuses(mut self, statuses: impl IntoIterator<Item = u16>) -> Self {
        self.failure_statuses = [0; 16];
        for status in statuses {
            let status = usize::from(status);
            if let Some(word) = self.failure_statuses.get_mut(status / 64) {
                *word |= 1 << (status % 64);
            }
        }
        self
    }

    /// Counts errors of type `E` (anywhere in an error's source chain) as
    /// the caller's own bugs: successes.
    #[must_use]
    pub fn exclude<E: Error + 'static>(self) -> Self {
        self.exclude_if(std::any::type_name::<E>(), |e| e.is::<E>())
    }

    /// Counts errors matching `matches` (tried on an error and each of its
    /// sources) as the caller's own bugs: successes. `label` names the rule
    /// in `Debug` output.
    #[must_use]
    pub fn exclude_if<F>(mut self, label: &'static str, matches: F) -> Self
    where
        F: Fn(&(dyn Error + 'static)) -> bool + Send + Sync + 'static,
    {
        Arc::make_mut(&mut self.excluded).push((label, Arc::new(matches)));
        self
    }

    /// Removes every exclusion, the adapter's defaults included: every
    /// error then counts as a failure (or inconclusive).
    #[must_use]
    pub fn clear_excluded(mut self) -> Self {
        self.excluded = Arc::new(Vec::new());
        self
    }

    /// Counts errors of type `E` (anywhere in the source chain) as
    /// inconclusive: no local slot was free, so the host was never asked.
    #[must_use]
    pub fn inconclusive<E: Error + 'static>(self) -> Self {
        self.inconclusive_if(std::any::type_name::<E>(), |e| e.is::<E>())
    }

    /// Counts errors matching `matches` (tried on an error and each of its
    /// sources) as inconclusive; `label` names the rule in `Debug` output.
    #[must_use]
    pub fn inconclusive_if<F>(mut self, label: &'static str, matches: F) -> Self
    where
        F: Fn(&(dyn Error + 'static)) -> bool + Send + Sync + 'static,
    {
        Arc::make_mut(&mut self.inconclusive).push((label, Arc::new(matches)));
        self
    }

    /// Removes every inconclusive rule, the full bulkhead included.
    #[must_use]
    pub fn clear_inconclusive(mut self) -> Self {
        self.inconclusive = Arc::new(Vec::new());
        self
    }

    /// Whether `status` is in the failure set.
    #[must_use]
    pub fn is_failure_status(&self, status: u16) -> bool {
        let status = usize::from(status);
        self.failure_statuses
            .get(status / 64)
            .is_some_and(|word| word & (1 << (status % 64)) != 0)
    }

    /// The verdict on a response with `status`.
    #[must_use]
    pub fn classify_status(&self, status: u16) -> Verdict {
        if self.is_failure_status(status) {
            Verdict::Failure
        } else {
            Verdict::Success
        }
    }

    /// The verdict on a request that ended in `error` (no response).
    #[must_use]
    pub fn classify_error(&self, error: &(dyn Error + 'static)) -> Verdict {
        let matches = |rules: &[(&'static str, Matcher)]| {
            let mut current = Some(error);
            while let Some(e) = current {
                if rules.iter().any(|(_, m)| m(e)) {
                    return true;
                }
                current = e.source();
            }
            false
        };
        if matches(&self.excluded) {
            Verdict::Success
        } else if matches(&self.inconclusive) {
            Verdict::Inconclusive
        } else {
            Verdict::Failure
        }
    }

    /// The verdict on a settled exchange: a response by its status, an
    /// error by [`classify_error`](Self::classify_error).
    ///
    /// ```
    /// use interlock::http::HttpStatusClassifier;
    /// use interlock::Verdict;
    ///
    /// let classifier = HttpStatusClassifier::new();
    /// let response = http::Response::builder().status(502).body(()).unwrap();
    /// let verdict = classifier.classify::<_, std::io::Error>(Ok(&response));
    /// assert_eq!(verdict, Verdict::Failure);
    /// ```
    #[must_use]
    pub fn classify<B, E>(&self, result: Result<&http::Response<B>, &E>) -> Verdict
    where
        E: Error + 'static,
    {
        match result {
            Ok(response) => self.classify_status(response.status().as_u16()),
            Err(error) => self.classify_error(error),
        }
    }

    /// The failure statuses, ascending.
    #[must_use]
    pub fn statuses(&self) -> Vec<u16> {
        (0..1024u16)
            .filter(|&s| self.is_failure_status(s))
            .collect()
    }
}

/// The HTTP status policy as a response classifier of the one-breaker
/// tower layer, [`CircuitBreakerLayer`](crate::tower::CircuitBreakerLayer):
/// a response with a failure status is a failure.
///
/// ```
/// use interlock::http::HttpStatusClassifier;
/// use interlock::tower::CircuitBreakerLayer;
/// use interlock::{CircuitBreaker, Config, SlidingWindow, State};
/// use tower::{service_fn, Layer, Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let config = Config::builder().minimum_number_of_calls(2).sliding_window(SlidingWindow::count(2)).build()?;
/// let breaker = CircuitBreaker::builder("inventory").config(config).build()?;
/// let upstream = service_fn(|_: http::Request<()>| async { http::Response::builder().status(500).body(()) });
/// let mut client = CircuitBreakerLayer::new(breaker.clone())
///     .classify_response(HttpStatusClassifier::new())
///     .layer(upstream);
/// for _ in 0..2 {
///     client.ready().await?.call(http::Request::new(())).await?;
/// }
/// assert_eq!(breaker.state(), State::Open);
/// assert_eq!(breaker.last_failure().unwrap().message(), "HTTP 500 Internal Server Error");
/// # Ok(())
/// # }
/// ```
impl<B> crate::tower::ClassifyResponse<http::Response<B>> for HttpStatusClassifier {
    fn classify_response(&self, response: &http::Response<B>) -> Verdict {
        self.classify_status(response.status().as_u16())
    }

    fn describe(&self, response: &http::Response<B>) -> String {
        format!("HTTP {}", response.status())
    }
}

impl fmt::Debug for HttpStatusClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels = |rules: &[(&'static str, Matcher)]| -> Vec<&'static str> {
            rules.iter().map(|(label, _)| *label).collect()
        };
        f.debug_struct("HttpStatusClassifier")
            .field("failure_statuses", &self.statuses())
            .field("excluded", &labels(&self.excluded))
            .field("inconclusive", &labels(&self.inconclusive))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapped(std::io::Error);
    impl fmt::Display for Wrapped {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("wrapped")
        }
    }
    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn default_statuses_table() {
        let c = HttpStatusClassifier::new();
        for (status, verdict) in [
            (200, Verdict::Success),
            (204, Verdict::Success),
            (301, Verdict::Success),
            (400, Verdict::Success),
            (404, Verdict::Success),
            (408, Verdict::Success),
            (429, Verdict::Failure),
            (500, Verdict::Failure),
            (501, Verdict::Success),
            (502, Verdict::Failure),
            (503, Verdict::Failure),
            (504, Verdict::Failure),
            (505, Verdict::Success),
            (999, Verdict::Success),
        ] {
            assert_eq!(c.classify_status(status), verdict, "{status}");
        }
        assert_eq!(c.statuses(), DEFAULT_FAILURE_STATUSES);
    }

    #[test]
    fn statuses_are_replaced_and_out_of_range_ignored() {
        let c = HttpStatusClassifier::new().failure_statuses([408, 2000]);
        assert_eq!(c.statuses(), [408]);
        assert_eq!(c.classify_status(503), Verdict::Success);
        assert_eq!(c.classify_status(2000), Verdict::Success);
    }

    #[test]
    fn rules_walk_the_source_chain_and_exclusion_wins() {
        let io = || std::io::Error::other("boom");
        let c = HttpStatusClassifier::new();
        assert_eq!(c.classify_error(&Wrapped(io())), Verdict::Failure);
        let c = c.exclude::<std::io::Error>();
        assert_eq!(c.classify_error(&Wrapped(io())), Verdict::Success);
        let c = c.inconclusive::<Wrapped>();
        assert_eq!(c.classify_error(&Wrapped(io())), Verdict::Success);
        let c = c.clear_excluded();
        assert_eq!(c.classify_error(&Wrapped(io())), Verdict::Inconclusive);
        let c = c.clear_inconclusive();
        assert_eq!(c.classify_error(&Wrapped(io())), Verdict::Failure);
    }

    #[test]
    fn debug_names_the_rules() {
        let c = HttpStatusClassifier::new().exclude_if("caller bug", |_| false);
        let shown = format!("{c:?}");
        assert!(shown.contains("caller bug"), "{shown}");
        assert!(shown.contains("::Full"), "{shown}");
        assert!(shown.contains("429"), "{shown}");
    }
}
