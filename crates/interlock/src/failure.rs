//! The error types a breaker accepts, and finding a rejection in any error.
//!
//! A guarded call may fail with any error a Rust service has:
//!
//! | the call's error | what `call`, `call_async` and `Pipeline::call` return | kind |
//! |---|---|---|
//! | a concrete type implementing [`std::error::Error`] (`std::io::Error`, your own enum, `reqwest::Error`, ...) | [`CallError<E>`] / [`PipelineError<E>`]: the rejection and the call's own error apart | [`Concrete`] |
//! | an error *handle* that derefs to `dyn Error + Send + Sync`: `anyhow::Error`, `eyre::Report`, `Box<dyn Error + Send + Sync>` | the handle itself: the call's own error as it was, or the rejection (or timeout, full bulkhead) converted into it | [`Handle`] |
//! | `Box<dyn Error>` (not `Send`) | the same, as a `Box<dyn Error>` | [`LocalHandle`] |
//!
//! The kind is inferred from the error type (the `K` parameter of the
//! methods is never written out). Either way the breaker's classifier sees
//! the error itself (for a handle, the error inside it, so
//! `downcast_ref::<YourError>()` works), and the last failure keeps its
//! `Display` text.
//!
//! ```
//! use interlock::{CircuitBreaker, CircuitOpenError};
//!
//! fn lookup(breaker: &CircuitBreaker) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
//!     // The closure's error is a boxed error, and so is `call`'s: `?` just works.
//!     let stock = breaker.call(|| -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
//!         Err("warehouse unreachable".into())
//!     })?;
//!     Ok(stock)
//! }
//!
//! let breaker = CircuitBreaker::new("inventory");
//! assert_eq!(lookup(&breaker).unwrap_err().to_string(), "warehouse unreachable");
//! assert_eq!(breaker.snapshot().failed_calls, 1);
//!
//! breaker.force_open();
//! let err = lookup(&breaker).unwrap_err();
//! assert!(err.downcast_ref::<CircuitOpenError>().is_some()); // the rejection, boxed
//! ```
//!
//! [`find_rejection`] finds a rejection anywhere in an error's chain,
//! whatever carried it there.

use std::error::Error;
use std::fmt;
use std::ops::Deref;
use std::sync::OnceLock;

use crate::error::{BoxError, Elapsed, Full, PipelineError};
use crate::error::{CallError, CircuitOpenError};

/// The kind of a concrete error type (one implementing [`std::error::Error`]).
#[derive(Debug)]
pub enum Concrete {}

/// The kind of an error handle that derefs to `dyn Error + Send + Sync`
/// (`anyhow::Error`, `eyre::Report`, `Box<dyn Error + Send + Sync>`).
#[derive(Debug)]
pub enum Handle {}

/// The kind of `Box<dyn Error>` (a handle that is not `Send`).
#[derive(Debug)]
pub enum LocalHandle {}

/// An error type a breaker can classify and keep as its last failure; `K`
/// is its kind ([`Concrete`], [`Handle`] or [`LocalHandle`]), inferred.
///
/// Implemented for every `E: std::error::Error + 'static` and for every
/// `Display` handle that derefs to `dyn Error (+ Send + Sync) + 'static` and
/// can be made from a rejection, so it is never implemented by hand.
pub trait Failure<K>: fmt::Display + Sized {
    /// What a guarded call returns for this error type:
    /// [`CallError<Self>`] for a concrete type, the handle itself for a handle.
    type CallError: CallErrorOf<Self>;
    /// What a pipeline returns for this error type:
    /// [`PipelineError<Self>`] for a concrete type, the handle itself for a handle.
    type PipelineError: PipelineErrorOf<Self>;

    /// The error as a classifier sees it: the error itself, or the error
    /// inside the handle.
    fn as_error(&self) -> &(dyn Error + 'static);

    /// `error` as a guarded call returns it.
    fn call_error(error: CallError<Self>) -> Self::CallError;

    /// `error` as a pipeline returns it.
    fn pipeline_error(error: PipelineError<Self>) -> Self::PipelineError;
}

impl<E: Error + 'static> Failure<Concrete> for E {
    type CallError = CallError<E>;
    type PipelineError = PipelineError<E>;

    #[inline]
    fn as_error(&self) -> &(dyn Error + 'static) {
        self
    }

    #[inline]
    fn call_error(error: CallError<E>) -> CallError<E> {
        error
    }

    #[inline]
    fn pipeline_error(error: PipelineError<E>) -> PipelineError<E> {
        error
    }
}

/// The other direction of [`Failure`]: `Self` is what a guarded call returns
/// when the call fails with `E`. It lets the compiler find `E` from the
/// type a caller expects (`fn f() -> Result<(), CallError<MyError>> {
/// breaker.call(|| Ok(())) }`); never implemented by hand.
pub trait CallErrorOf<E> {}

impl<E: Error + 'static> CallErrorOf<E> for CallError<E> {}

impl<H, D> CallErrorOf<H> for H
where
    H: Deref<Target = D>,
    D: ?Sized + ErrorObject,
{
}

/// The other direction of [`Failure`] for pipelines, as [`CallErrorOf`].
pub trait PipelineErrorOf<E> {}

impl<E: Error + 'static> PipelineErrorOf<E> for PipelineError<E> {}

impl<H, D> PipelineErrorOf<H> for H
where
    H: Deref<Target = D>,
    D: ?Sized + ErrorObject,
{
}

/// The error objects a handle derefs to.
pub trait ErrorObject: Error + 'static {}

impl ErrorObject for dyn Error + Send + Sync + 'static {}
impl ErrorObject for dyn Error + 'static {}

/// What a handle must be made from: every error a layer of the crate can
/// return in its place.
fn from_layer<H>(error: PipelineError<H>) -> H
where
    H: From<CircuitOpenError> + From<Elapsed> + From<Full> + From<StrategyError>,
{
    match error {
        PipelineError::Inner(e) => e,
        PipelineError::Rejected(open) => H::from(open),
        PipelineError::Timeout(elapsed) => H::from(elapsed),
        PipelineError::BulkheadFull(full) => H::from(full),
        PipelineError::Other(other) => H::from(StrategyError(other)),
    }
}

impl<H> Failure<Handle> for H
where
    H: Deref<Target = dyn Error + Send + Sync + 'static> + fmt::Display,
    H: From<CircuitOpenError> + From<Elapsed> + From<Full> + From<StrategyError>,
{
    type CallError = H;
    type PipelineError = H;

    #[inline]
    fn as_error(&self) -> &(dyn Error + 'static) {
        &**self
    }

    #[inline]
    fn call_error(error: CallError<H>) -> H {
        match error {
            CallError::Rejected(open) => H::from(open),
            CallError::Inner(e) => e,
        }
    }

    fn pipeline_error(error: PipelineError<H>) -> H {
        from_layer(error)
    }
}

impl<H> Failure<LocalHandle> for H
where
    H: Deref<Target = dyn Error + 'static> + fmt::Display,
    H: From<CircuitOpenError> + From<Elapsed> + From<Full> + From<StrategyError>,
{
    type CallError = H;
    type PipelineError = H;

    #[inline]
    fn as_error(&self) -> &(dyn Error + 'static) {
        &**self
    }

    #[inline]
    fn call_error(error: CallError<H>) -> H {
        match error {
            CallError::Rejected(open) => H::from(open),
            CallError::Inner(e) => e,
        }
    }

    fn pipeline_error(error: PipelineError<H>) -> H {
        from_layer(error)
    }
}

/// The error of a custom strategy ([`PipelineError::Other`]) as a handle
/// returned by a pipeline carries it: transparent (its `Display` and
/// `source()` are the boxed error's).
#[derive(Debug)]
pub struct StrategyError(pub BoxError);

impl fmt::Display for StrategyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl Error for StrategyError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

/// Opens an error type that holds another error without returning it from
/// [`source`](Error::source): `Some(inner)` if `error` is such a wrapper.
pub type Opener = for<'a> fn(&'a (dyn Error + 'static)) -> Option<&'a (dyn Error + 'static)>;

/// Registered openers; a fixed array, so a look-up is a few loads.
static OPENERS: [OnceLock<Opener>; 8] = [const { OnceLock::new() }; 8];

/// Teaches [`find_rejection`] (and so [`UnlessOpen`](crate::pipeline::UnlessOpen),
/// the backon helpers and every breaker) to look inside an error type that
/// holds an error without exposing it through
/// [`source`](Error::source), as `ureq::Error::Other` does.
/// `interlock-ureq` and `interlock-reqwest` register theirs when a
/// middleware is built; register one at start-up for a wrapper of your own.
///
/// Returns `false` (registering nothing) when eight openers are already
/// registered; registering the same function twice is harmless.
///
/// ```
/// use interlock::{find_rejection, register_opener, CircuitBreaker};
/// use std::error::Error;
///
/// /// A wrapper that keeps its inner error to itself.
/// #[derive(Debug)]
/// struct Opaque(Box<dyn Error + Send + Sync>);
/// impl std::fmt::Display for Opaque {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("opaque") }
/// }
/// impl Error for Opaque {}
///
/// let breaker = CircuitBreaker::new("svc");
/// breaker.force_open();
/// let wrapped = Opaque(Box::new(breaker.acquire().unwrap_err()));
/// assert!(find_rejection(&wrapped).is_none());
/// register_opener(|e| e.downcast_ref::<Opaque>().map(|o| &*o.0 as &(dyn Error + 'static)));
/// assert_eq!(find_rejection(&wrapped).unwrap().breaker_name(), "svc");
/// ```
pub fn register_opener(opener: Opener) -> bool {
    for slot in &OPENERS {
        if let Some(existing) = slot.get() {
            if std::ptr::fn_addr_eq(*existing, opener) {
                return true;
            }
            continue;
        }
        if slot.set(opener).is_ok() {
            return true;
        }
        if slot.get().is_some_and(|e| std::ptr::fn_addr_eq(*e, opener)) {
            return true;
        }
    }
    false
}

/// How deep [`find_rejection`] follows sources and openers: far beyond any
/// real chain, and a bound for a chain that loops.
const MAX_DEPTH: usize = 64;

/// The circuit-open rejection in `error`'s chain, if there is one: `error`
/// itself, any error in its [`source`](Error::source) chain, an error inside
/// a `std::io::Error` (`io::Error::other(open)`), or inside a wrapper an
/// [opener](register_opener) knows.
///
/// ```
/// use interlock::{find_rejection, CallError, CircuitBreaker};
///
/// let breaker = CircuitBreaker::new("payments");
/// breaker.force_open();
/// let err: CallError<std::io::Error> = breaker.call(|| Ok(())).unwrap_err();
///
/// // However it travels: boxed, inside an io::Error, inside anything with a source().
/// let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err);
/// assert_eq!(find_rejection(&*boxed).unwrap().breaker_name(), "payments");
/// let io = std::io::Error::other(boxed);
/// assert_eq!(find_rejection(&io).unwrap().breaker_name(), "payments");
/// assert!(find_rejection(&std::io::Error::other("unrelated")).is_none());
/// ```
#[must_use]
pub fn find_rejection<'a>(error: &'a (dyn Error + 'static)) -> Option<&'a CircuitOpenError> {
    find(error, 0)
}

fn find<'a>(error: &'a (dyn Error + 'static), depth: usize) -> Option<&'a CircuitOpenError> {
    let mut current = Some(error);
    let mut depth = depth;
    while let Some(e) = current {
        if depth >= MAX_DEPTH {
            return None;
        }
        if let Some(open) = e.downcast_ref::<CircuitOpenError>() {
            return Some(open);
        }
        if let Some(inner) = opened(e) {
            if let Some(open) = find(inner, depth + 1) {
                return Some(open);
            }
        }
        depth += 1;
        current = e.source();
    }
    None
}

/// The error inside `e` that its `source()` does not return, if any.
fn opened<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a (dyn Error + 'static)> {
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        return io.get_ref().map(|inner| inner as &(dyn Error + 'static));
    }
    OPENERS
        .iter()
        .map_while(OnceLock::get)
        .find_map(|open| open(e))
}

// These two live here, with `Failure`, so that `error` (below) never names
// `failure` (above it).
impl<E> PipelineError<E> {
    /// The circuit-open rejection this error is or carries: a breaker
    /// layer's [`Rejected`](Self::Rejected), or one anywhere in the call's
    /// own error (a breaker called inside the closure, an HTTP adapter's
    /// rejection, ...; see [`find_rejection`](crate::find_rejection)).
    #[must_use]
    pub fn find_rejection<K>(&self) -> Option<&CircuitOpenError>
    where
        E: Failure<K>,
    {
        find_rejection(self.as_error())
    }

    /// The wrapped error itself, whichever variant holds it (for an error
    /// handle, the error inside it).
    pub fn as_error<K>(&self) -> &(dyn Error + 'static)
    where
        E: Failure<K>,
    {
        match self {
            PipelineError::Inner(e) => e.as_error(),
            PipelineError::Rejected(open) => open,
            PipelineError::Timeout(elapsed) => elapsed,
            PipelineError::BulkheadFull(full) => full,
            PipelineError::Other(other) => &**other,
        }
    }
}

// `into_error` lives here, with `Failure`, so that `error` (below) never
// names `failure` (above it).
impl<E> CallError<E> {
    /// The error as [`call`](crate::CircuitBreaker::call) would return it
    /// for `E`: itself for a concrete error type; for an error handle
    /// (`anyhow::Error`, `eyre::Report`, a boxed error) the handle, holding
    /// the call's own error or the rejection. For the classified variants,
    /// which keep `CallError` for any `E`:
    ///
    /// ```
    /// use interlock::{CircuitBreaker, CircuitOpenError, Verdict};
    ///
    /// type BoxError = Box<dyn std::error::Error + Send + Sync>;
    /// fn status(breaker: &CircuitBreaker) -> Result<u16, BoxError> {
    ///     let status = breaker
    ///         .call_classified(|| Ok::<u16, BoxError>(503), |_| Verdict::Failure)
    ///         .map_err(|e| e.into_error())?;
    ///     Ok(status)
    /// }
    ///
    /// let breaker = CircuitBreaker::new("api");
    /// breaker.force_open();
    /// assert!(status(&breaker).unwrap_err().is::<CircuitOpenError>());
    /// ```
    pub fn into_error<K>(self) -> E::CallError
    where
        E: Failure<K>,
    {
        E::call_error(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Looping;
    impl fmt::Display for Looping {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("loops")
        }
    }
    impl Error for Looping {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(self)
        }
    }

    #[test]
    fn a_chain_that_loops_ends_the_search() {
        assert!(find_rejection(&Looping).is_none());
    }
}
