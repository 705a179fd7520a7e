//! [`Breaker`]: a named breaker of the app's [`Registry`], as an extractor.

use std::fmt;
use std::future::{Ready, ready};
use std::marker::PhantomData;
use std::ops::Deref;

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use interlock::{CircuitBreaker, Registry};

/// Names a breaker at the type level, for the [`Breaker`] extractor.
///
/// ```
/// use interlock_actix::BreakerName;
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

/// Extracts the breaker named `N::NAME` from the app's [`Registry`],
/// creating it on first use; every request (and every route) naming the
/// same `N` gets the same breaker.
///
/// Register the registry with `App::app_data(web::Data::new(registry))`
/// (or as a plain `Registry`, which is already cheap to clone). Handlers
/// that pick names at run time take `web::Data<Registry>` and call
/// [`Registry::get`] instead.
///
/// Derefs to [`CircuitBreaker`].
///
/// # Errors
///
/// Extraction fails with `500 Internal Server Error` when the app has no
/// registry: a setup mistake, as with a missing `web::Data`.
///
/// ```
/// use actix_web::{App, http::StatusCode, test, web};
/// use interlock::Registry;
/// use interlock_actix::{Breaker, BreakerName, GuardError};
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
/// async fn orders(db: Breaker<OrdersDb>) -> Result<&'static str, GuardError<actix_web::Error>> {
///     Ok(db.call_async(fetch_orders).await.map_err(|e| e.map_inner(actix_web::Error::from))?)
/// }
///
/// # #[actix_web::main]
/// # async fn main() {
/// let registry = Registry::new();
/// let app = test::init_service(
///     App::new()
///         .app_data(web::Data::new(registry.clone()))
///         .route("/orders", web::get().to(orders)),
/// )
/// .await;
///
/// registry.get("orders-db").force_open();
/// let response = test::call_service(&app, test::TestRequest::get().uri("/orders").to_request()).await;
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

impl<N: BreakerName> FromRequest for Breaker<N> {
    type Error = actix_web::Error;
    type Future = Ready<Result<Self, actix_web::Error>>;

    fn from_request(req: &HttpRequest, _payload: &mut Payload) -> Self::Future {
        let registry = req
            .app_data::<web::Data<Registry>>()
            .map(|data| data.get_ref())
            .or_else(|| req.app_data::<Registry>());
        ready(match registry {
            Some(registry) => Ok(Breaker {
                breaker: registry.get(N::NAME),
                name: PhantomData,
            }),
            None => Err(actix_web::error::ErrorInternalServerError(
                "breaker registry is not configured",
            )),
        })
    }
}
