//! A live dashboard, a JSON API and operator controls for the breakers of
//! an [`interlock`] [`Registry`](interlock::Registry), as an axum [`Router`](axum::Router).
//!
//! ```no_run
//! use interlock::Registry;
//! use interlock_admin::{Admin, EventFeed};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let feed = EventFeed::new(); // streams changes to the page as they happen
//! let registry = Registry::builder().listener(feed.clone()).build()?;
//! let admin = Admin::builder(registry.clone())
//!     .feed(feed)
//!     .bearer_token(std::env::var("INTERLOCK_ADMIN_TOKEN")?) // omit: read-only
//!     .build()?;
//!
//! // your own routes, then the dashboard at /interlock and /interlock/
//! let app = admin.mount(axum::Router::new(), "/interlock")?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await?; // open http://127.0.0.1:3000/interlock
//! # Ok(())
//! # }
//! ```
//!
//! # The page
//!
//! Above 20 breakers it opens as a compact table (name, state, failure
//! rate, slow rate, calls, state since, retry in), sortable by every column
//! (by state by default, what needs attention first), filtered by state and
//! searched by name; a breaker's card (its timeline since it was created,
//! rates, config, last failure and operator buttons) opens beside the table
//! on demand. Up to 20 breakers it shows their cards; either view can be
//! chosen. It is usable from the keyboard (the table is one tab stop, the
//! arrow keys move between breakers, Enter opens a card, Escape closes it
//! and gives focus back) and by screen readers (a real table with sorted
//! columns marked, labelled controls and groups, a text summary of each
//! timeline, live regions for the connection and for notices). Until its
//! first message arrives it says it is connecting, never "no breaker yet".
//!
//! # Live updates
//!
//! The page opens one server-sent event stream. Its first message, `init`,
//! has every breaker as one compact row (an array whose columns it names)
//! and no history: at 1,000 breakers it is **86.5 KB** (measured by the
//! browser test, `tests/browser/scale.rs`; the budget is 250 KB). After it,
//! a `delta` carries only the rows that changed since the previous sample
//! (once per [sample interval](AdminBuilder::sample_interval), and nothing
//! when nothing changed), and an `event` each state change, reset, storage
//! outage, operator action or removal, as it happens. With 50 of 1,000
//! breakers (5 %) changing every second, one tab receives **3.8–5.3 KB/s**
//! on the wire, HTTP framing included (measured over 10 s by a proxy in
//! front of the server, in the same test; the budget is 20 KB/s). A tab in
//! the background closes its stream (Page Visibility) and receives nothing
//! until it is shown again, when it starts from a fresh `init`. A card
//! fetches its breaker's timeline when it opens, then extends it from the
//! deltas.
//!
//! A breaker the registry forgets ([`Registry::remove`](interlock::Registry::remove),
//! `retain`, `expire_after_idle`, `max_breakers`) leaves the stream at once
//! when the feed is one of the registry's listeners (it receives
//! [`Event::BreakerRemoved`](interlock::Event::BreakerRemoved)), and at the
//! next sample otherwise: an `event` of kind `removed`, which also goes to
//! the activity log, and the page drops its row or card. The page counts what it receives in
//! `window.interlockStats` (messages, bytes, the size of each `init`), for
//! diagnostics.
//!
//! # The fleet view
//!
//! For a registry coordinated through a storage, the table and the cards
//! show beside each breaker's own state the shared state every instance
//! follows, as this instance last read it: state, version, when it opened
//! and the probes of the current round. With a token, a card has two
//! clearly separate groups of buttons: *this instance only* (the local
//! overrides) and *whole fleet* (a trip or close of the shared state,
//! fenced by the version shown, exactly as the `interlock` command line's
//! `trip` and `close`: if any instance wrote in between, nothing is written
//! and the page says what the state is now).
//!
//! # Routes
//!
//! Relative to the mount point (the page is at the mount point itself,
//! with or without a trailing slash when mounted with [`Admin::mount`]):
//!
//! | route | answer |
//! |---|---|
//! | `GET /` | the dashboard |
//! | `GET /breakers` | `{"now": ms, "controls": bool, "coordinated": bool, "fleet_controls": bool, "breakers": [...]}`: per breaker `name`, `state`, `state_since` and `created_at` (ms on the feed's clock, as `now`), `snapshot` (`total_calls`, `failed_calls`, `slow_calls`), `failure_rate`, `slow_call_rate`, `retry_after_secs`, `last_failure` (`type_name`, `message`), `is_coordinated`, `is_degraded`, `shared` (the cached shared state of a coordinated breaker: `state`, `version`, `opened_at` in ms of the storage's clock, `probes_permitted`, `probes_remaining`, `probes_completed`, `probe_failures`, `probe_slows`), `generation` and `config` |
//! | `GET /breakers/{name}` | one breaker; 404 for an unknown name |
//! | `GET /breakers/{name}/history` | `{"now", "name", "created_at", "samples": [{"t", "state", "failure_rate", "slow_call_rate"}], "events": [...]}`: its timeline since it was created, within the feed's history, one sample per change; 404 for an unknown name |
//! | `GET /events` | server-sent events: `init`, then `delta` and `event` (see above) |
//! | `POST /breakers/{name}/force-open`, `/disable`, `/metrics-only`, `/reset` | this instance's operator controls, **only when a bearer token is configured**; the breaker's JSON after the action |
//! | `POST /breakers/{name}/fleet/trip?version=N`, `/fleet/close?version=N` | fleet-wide, fenced at shared version `N`, **only with a bearer token and a coordinated registry**: `{"applied", "message", "shared", "breaker"}`; 409 if the shared state is no longer at `N` (nothing written), 400 without `N`, 503 if the storage did not answer |
//!
//! The page loads no build output and nothing from a CDN: its HTML,
//! scripts and stylesheet are compiled into the crate. Its links are
//! relative to its own URL, so it works under any prefix.
//!
//! # Security
//!
//! - Without [`AdminBuilder::bearer_token`] the write routes do not exist
//!   (404); the dashboard is read-only.
//! - With one, a write needs `Authorization: Bearer <token>`; the token is
//!   compared in constant time. A missing or wrong token gets 401 and
//!   changes nothing; an unknown name gets 404 and creates no breaker. The
//!   page keeps the token in its password field and sends it only in that
//!   header: never in a URL, a cookie or storage. Every action is logged
//!   through `tracing` (target `interlock_admin`) and sent to every open
//!   dashboard.
//! - Breaker names are data, never markup: the page builds its DOM with
//!   `textContent` and attributes, never `innerHTML`, and is served with a
//!   `Content-Security-Policy` that allows only its own scripts.
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
mod reply;
mod row;
mod tracks;
mod view;

pub use admin::{Admin, AdminBuilder};
pub use error::BuildError;
pub use feed::{EventFeed, EventFeedBuilder};
