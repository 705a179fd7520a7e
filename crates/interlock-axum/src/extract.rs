//! [`Breaker`]: a named breaker of the app's [`Registry`], as an extractor.

use std::convert::Infallible;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use axum_core::extract::{FromRef, FromRequestParts};
use http::request::Parts;
use interlock::{CircuitBreaker, Registry};

/// Names a breaker at the type level, for the [`Breaker`] extractor.
///
/// ```
/// use interlock_axum::BreakerName;
///
/// struct OrdersDb;
///
/// impl BreakerName for OrdersDb {
///     const NAME: &'static str = "orders-db";
/// }
///
/// assert_eq!(OrdersDb::NAME, "orders-db");
/// ```
pub trait BreakerName {
    /// The breaker's name in the [`Registry`].
    const NAME: &'static str;
}

/// Extracts the breaker named `N::NAME` from the app state's [`Registry`],
/// creating it on first use; every request (and every route) naming the
/// same `N` gets the same breaker.
///
/// The state must hold a [`Registry`]: be one (`Router::with_state(registry)`)
/// or let one be taken from it with [`FromRef`] (`#[derive(FromRef)]` on
/// your state struct). Handlers that pick names at run time take
/// `State<Registry>` and call [`Registry::get`] instead.
///
/// Derefs to [`CircuitBreaker`]. It never rejects a request.
///
/// ```
/// use axum::{Router, body::Body, http::{Request, StatusCode}, routing::get};
/// use interlock::Registry;
/// use interlock_axum::{Breaker, BreakerName, GuardError};
/// use tower::ServiceExt;
///
/// struct OrdersDb;
/// impl BreakerName for OrdersDb {
///     const NAME: &'static str = "orders-db";
/// }
///
/// async fn fetch_orders() -> Result<&'static str, std::io::Error> {
///     Ok("[]")
/// }
///
/// async fn orders(breaker: Breaker<OrdersDb>) -> Result<&'static str, GuardError<String>> {
///     let orders = breaker.call_async(fetch_orders).await.map_err(|e| e.map_inner(|e| e.to_string()))?;
///     Ok(orders)
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let registry = Registry::new();
/// let app = Router::new().route("/orders", get(orders)).with_state(registry.clone());
///
/// registry.get("orders-db").force_open();
/// let response = app.oneshot(Request::get("/orders").body(Body::empty()).unwrap()).await.unwrap();
/// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
/// # }
/// ```
pub struct Breaker<N> {
    breaker: CircuitBreaker,
    name: PhantomData<fn() -> N>,
}

impl<N> Breaker<N> {
    /// The breaker.
    #[must_use]
    pub fn into_inner(self) -> CircuitBreaker {
        self.breaker
    }
}

impl<N> Deref for Breaker<N> {
    type Target = CircuitBreaker;

    fn deref(&self) -> &CircuitBreaker {
        &self.breaker
    }
}

impl<N> Clone for Breaker<N> {
    fn clone(&self) -> Self {
        Breaker {
            breaker: self.breaker.clone(),
            name: PhantomData,
        }
    }
}

impl<N> fmt::Debug for Breaker<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Breaker").field(&self.breaker).finish()
    }
}

impl<N, S> FromRequestParts<S> for Breaker<N>
where
    N: BreakerName,
    Registry: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Infallible;

    async fn from_request_parts(_parts: &mut Parts, state: &S) -> Result<Self, Infallible> {
        Ok(Breaker {
            breaker: Registry::from_ref(state).get(N::NAME),
            name: PhantomData,
        })
    }
}
