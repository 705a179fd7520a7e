//! Fleet-wide operator writes: `POST /breakers/{name}/fleet/trip` and
//! `/fleet/close`, fenced by the version the operator was shown, exactly
//! as the `interlock` command line's `trip` and `close`.
//!
//! The write goes through the registry's own coordinator
//! ([`Coordinator::trip_shared`], [`Coordinator::close_shared`]): a blocking
//! storage on tokio's blocking pool, an async one on the request's task.
//! This instance adopts the answer at once; every other instance at its
//! next poll, or at once with change notices.

use std::any::Any;
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State as AxumState};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use futures_util::future::BoxFuture;
use interlock::State;
use interlock::mode::{Async, Blocking, Mode};
use interlock::storage::{Coordinator, SharedState, StorageError};
use serde::Serialize;

use crate::auth::Token;
use crate::feed::FeedInner;
use crate::reply::{error, json, refuse};
use crate::view::{BreakerView, SharedView};

/// What the fleet route needs of the dashboard's state (the admin's
/// `Shared` implements it), so that this module stays below the one that
/// builds the routes.
pub(crate) trait FleetHost: Send + Sync + 'static {
    /// The operator token, if one is set.
    fn token(&self) -> Option<&Token>;
    /// The view of breaker `name`, if this instance has it.
    fn view(&self, name: &str) -> Option<BreakerView>;
    /// The fleet-wide writer, for a coordinated registry.
    fn fleet(&self) -> Option<&dyn Fleet>;
    /// The event feed, to record the action.
    fn feed(&self) -> &FeedInner;
}

/// Which fleet-wide write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FleetWrite {
    /// Open the shared breaker: every instance rejects its calls.
    Trip,
    /// Close the shared breaker: every instance admits its calls again.
    Close,
}

impl FleetWrite {
    pub(crate) const ALL: [FleetWrite; 2] = [FleetWrite::Trip, FleetWrite::Close];

    pub(crate) fn route(self) -> &'static str {
        match self {
            FleetWrite::Trip => "/breakers/{name}/fleet/trip",
            FleetWrite::Close => "/breakers/{name}/fleet/close",
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            FleetWrite::Trip => "fleet_trip",
            FleetWrite::Close => "fleet_close",
        }
    }

    fn target(self) -> State {
        match self {
            FleetWrite::Trip => State::Open,
            FleetWrite::Close => State::Closed,
        }
    }
}

/// A registry's coordinator, whatever its mode.
pub(crate) trait Fleet: Send + Sync + 'static {
    /// The shared state of `name` as the storage holds it now.
    fn read(&self, name: String) -> BoxFuture<'static, Result<SharedState, StorageError>>;
    /// The fenced write.
    fn write(
        &self,
        name: String,
        write: FleetWrite,
        expected_version: u64,
    ) -> BoxFuture<'static, Result<SharedState, StorageError>>;
}

/// The fleet of a registry's coordinator: its mode picks how the storage
/// is called. `None` for a mode without storage.
pub(crate) fn of<M: Mode>(coordinator: Coordinator<M>) -> Option<Box<dyn Fleet>> {
    let any: Box<dyn Any> = Box::new(coordinator);
    match any.downcast::<Coordinator<Blocking>>() {
        Ok(blocking) => Some(Box::new(BlockingFleet(*blocking))),
        Err(any) => any
            .downcast::<Coordinator<Async>>()
            .ok()
            .map(|c| Box::new(AsyncFleet(*c)) as Box<dyn Fleet>),
    }
}

/// A blocking storage, called on tokio's blocking pool (a network round
/// trip must not stall the server's workers).
struct BlockingFleet(Coordinator<Blocking>);

/// The pool's own error (the call panicked or the runtime shut down).
fn joined(
    result: Result<Result<SharedState, StorageError>, tokio::task::JoinError>,
) -> Result<SharedState, StorageError> {
    result.unwrap_or_else(|e| Err(Box::new(e)))
}

impl Fleet for BlockingFleet {
    fn read(&self, name: String) -> BoxFuture<'static, Result<SharedState, StorageError>> {
        let coordinator = self.0.clone();
        Box::pin(async move {
            joined(tokio::task::spawn_blocking(move || coordinator.read_shared(&name)).await)
        })
    }

    fn write(
        &self,
        name: String,
        write: FleetWrite,
        expected: u64,
    ) -> BoxFuture<'static, Result<SharedState, StorageError>> {
        let coordinator = self.0.clone();
        Box::pin(async move {
            joined(
                tokio::task::spawn_blocking(move || match write {
                    FleetWrite::Trip => coordinator.trip_shared(&name, expected),
                    FleetWrite::Close => coordinator.close_shared(&name, expected),
                })
                .await,
            )
        })
    }
}

/// An async storage, awaited on the request's task.
struct AsyncFleet(Coordinator<Async>);

impl Fleet for AsyncFleet {
    fn read(&self, name: String) -> BoxFuture<'static, Result<SharedState, StorageError>> {
        let coordinator = self.0.clone();
        Box::pin(async move { coordinator.read_shared(&name).await })
    }

    fn write(
        &self,
        name: String,
        write: FleetWrite,
        expected: u64,
    ) -> BoxFuture<'static, Result<SharedState, StorageError>> {
        let coordinator = self.0.clone();
        Box::pin(async move {
            match write {
                FleetWrite::Trip => coordinator.trip_shared(&name, expected).await,
                FleetWrite::Close => coordinator.close_shared(&name, expected).await,
            }
        })
    }
}

/// The answer to a fleet-wide write.
#[derive(Serialize)]
struct Reply {
    /// Whether this request changed the shared state.
    applied: bool,
    /// What happened, in words.
    message: String,
    /// The shared state after the request.
    shared: SharedView,
    /// This instance's view of the breaker after it.
    breaker: Option<BreakerView>,
}

/// `v3 OPEN`, as the messages and the activity log say it.
fn brief(s: &SharedState) -> String {
    format!("{} v{}", s.state.as_str().to_uppercase(), s.version)
}

/// The `version` of a `version=N` query: the shared version the operator
/// was shown.
fn expected_version(query: Option<&str>) -> Option<u64> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("version="))?
        .parse()
        .ok()
}

/// `POST /breakers/{name}/fleet/<trip|close>?version=N`: the token (401),
/// the name (404: this instance must know the breaker), the version shown
/// (400 without one), then the CLI's protocol: read the shared state;
/// 409 if it is no longer at the version shown; nothing to do if it already
/// is what was asked; else the fenced write, 409 if another writer got
/// there first, 503 if the storage did not answer.
pub(crate) async fn act<H: FleetHost>(
    AxumState(shared): AxumState<Arc<H>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    write: FleetWrite,
) -> Response {
    let name = path.ok().map(|Path(name)| name);
    if let Some(refused) = refuse(shared.token(), &headers, write.as_str(), name.as_deref()) {
        return refused;
    }
    let Some(name) = name.filter(|n| shared.view(n).is_some()) else {
        return error(StatusCode::NOT_FOUND, "no such breaker");
    };
    let Some(expected) = expected_version(query.as_deref()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "a fleet-wide write needs the shared version you were shown: ?version=N",
        );
    };
    let Some(fleet) = shared.fleet() else {
        return error(StatusCode::NOT_FOUND, "the registry is not coordinated");
    };
    let reply = |status, applied, message: String, state: &SharedState| {
        json(
            status,
            &Reply {
                applied,
                message,
                shared: SharedView::from(state),
                breaker: shared.view(&name),
            },
        )
    };
    let unavailable = |e: StorageError, what: &str| {
        tracing::warn!(
            target: "interlock_admin",
            action = write.as_str(),
            breaker = ?name,
            error = %e,
            "fleet-wide action failed: the storage did not answer"
        );
        json(
            StatusCode::SERVICE_UNAVAILABLE,
            &serde_json::json!({
                "error": format!("the storage did not answer {what}: {e}"),
            }),
        )
    };

    let seen = match fleet.read(name.clone()).await {
        Ok(seen) => seen,
        Err(e) => return unavailable(e, "(nothing written)"),
    };
    if seen.version != expected {
        return reply(
            StatusCode::CONFLICT,
            false,
            format!(
                "the shared state changed since you looked: it is {}, not v{expected}; nothing written",
                brief(&seen)
            ),
            &seen,
        );
    }
    if seen.state == write.target() {
        return reply(
            StatusCode::OK,
            false,
            format!("already {}; nothing written", brief(&seen)),
            &seen,
        );
    }
    let written = match fleet.write(name.clone(), write, seen.version).await {
        Ok(written) => written,
        Err(e) => {
            return unavailable(
                e,
                "(the write may or may not have been applied: look again)",
            );
        }
    };
    if written.state != write.target() || written.version <= seen.version {
        return reply(
            StatusCode::CONFLICT,
            false,
            format!(
                "the shared state changed since you looked: it is {} (you saw {}); nothing written",
                brief(&written),
                brief(&seen)
            ),
            &written,
        );
    }
    let detail = format!("fleet-wide: shared {} → {}", brief(&seen), brief(&written));
    tracing::info!(
        target: "interlock_admin",
        action = write.as_str(),
        breaker = ?name,
        from = seen.state.as_str(),
        to = written.state.as_str(),
        version = written.version,
        "fleet-wide operator action"
    );
    shared.feed().record_action(
        &name,
        write.as_str(),
        seen.state.as_str(),
        written.state.as_str(),
        Some(detail.clone()),
    );
    reply(StatusCode::OK, true, detail, &written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_shown_comes_from_the_query() {
        assert_eq!(expected_version(Some("version=17")), Some(17));
        assert_eq!(expected_version(Some("x=1&version=0")), Some(0));
        for bad in [
            None,
            Some(""),
            Some("version="),
            Some("version=-1"),
            Some("v=3"),
            Some("version=1e3"),
        ] {
            assert_eq!(expected_version(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn only_coordinators_make_a_fleet() {
        use interlock::storage::MemoryStorage;
        assert!(of(Coordinator::manual(MemoryStorage::new())).is_some());
        assert!(of(Coordinator::manual_async(MemoryStorage::new())).is_some());
    }
}
