//! A live dashboard, a JSON API and operator controls for the breakers of
//! an [`interlock`] [`Registry`](interlock::Registry), as an axum [`Router`](axum::Router).
//!
//! ```no_run
//! use interlock::Registry;
//! use interlock_admin::{Admin, EventFeed};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let feed = EventFeed::new(); // streams state changes to the page as they happen
//! let registry = Registry::builder().listener(feed.clone()).build()?;
//! let admin = Admin::builder(registry.clone())
//!     .feed(feed)
//!     .bearer_token(std::env::var("INTERLOCK_ADMIN_TOKEN")?) // omit: read-only
//!     .build()?;
//!
//! let app = axum::Router::new()
//!     // .route("/orders", ...) your own routes
//!     .nest("/interlock", admin.router());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await?; // open http://127.0.0.1:3000/interlock
//! # Ok(())
//! # }
//! ```
//!
//! # Routes
//!
//! Relative to the mount point (visit the page at the mount point itself,
//! `/interlock` above):
//!
//! | route | answer |
//! |---|---|
//! | `GET /` | the dashboard: one card per breaker with its state, rates, config and a timeline of its state and failure rate over the feed's history (5 minutes by default), updated live |
//! | `GET /breakers` | `{"now": ms, "controls": bool, "breakers": [...]}`: per breaker `name`, `state`, `snapshot` (`total_calls`, `failed_calls`, `slow_calls`), `failure_rate`, `slow_call_rate`, `retry_after_secs`, `last_failure` (`type_name`, `message`), `is_coordinated`, `is_degraded`, `shared` (the cached shared state of a coordinated breaker), `generation` and `config` |
//! | `GET /breakers/{name}` | one breaker; 404 for an unknown name |
//! | `GET /events` | server-sent events: `init` (every breaker with its history, and the recent activity), then `event` (state changes, resets, storage outages, operator actions) and `sample` (every breaker, every sample interval) |
//! | `POST /breakers/{name}/force-open`, `/disable`, `/metrics-only`, `/reset` | operator controls, **only when a bearer token is configured**; the breaker's JSON after the action |
//!
//! The page loads no build output and nothing from a CDN: its HTML, script
//! and stylesheet are compiled into the crate. Its links are relative to
//! its own URL, so it works under any prefix.
//!
//! # Security
//!
//! - Without [`AdminBuilder::bearer_token`] the write routes do not exist
//!   (404); the dashboard is read-only.
//! - With one, a write needs `Authorization: Bearer <token>`; the token is
//!   compared in constant time. A missing or wrong token gets 401 and
//!   changes nothing; an unknown name gets 404 and creates no breaker.
//!   Every action is logged through `tracing` (target `interlock_admin`)
//!   and sent to every open dashboard.
//! - Breaker names are data, never markup: the page builds its DOM with
//!   `textContent` and attributes, never `innerHTML`, and is served with a
//!   `Content-Security-Policy` that allows only its own script.
//! - The read routes show names, states and last error messages of your
//!   dependencies: mount them where only operators can reach them.
//!
//! # Minimum supported Rust version
//!
//! Rust 1.85, as the core. Raising it is a minor-version change.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

mod admin;
mod auth;
mod error;
mod feed;
mod fleet;
mod row;
mod tracks;
mod view;

pub use admin::{Admin, AdminBuilder};
pub use error::BuildError;
pub use feed::{EventFeed, EventFeedBuilder};
