//! [`Admin`]: the router, its handlers and the sampler.

use std::convert::Infallible;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State as AxumState};
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, X_FRAME_OPTIONS};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::stream::{self, Stream};
use interlock::mode::Mode;
use interlock::{CircuitBreaker, Registry, State};
use serde::Serialize;
use tokio::sync::broadcast;

use crate::auth::Token;
use crate::error::BuildError;
use crate::feed::{EventFeed, FeedInner, InitHeader, Message};
use crate::fleet::{self, Fleet, FleetHost, FleetWrite};
use crate::reply::{error, json, refuse, with_common_headers};
use crate::tracks::History;
use crate::view::{BreakerView, Reading, secs};

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const CARD_JS: &str = include_str!("../assets/card.js");
const STYLE_CSS: &str = include_str!("../assets/style.css");

/// The page loads nothing but its own script and stylesheet, talks only
/// to its own origin, and cannot be framed.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

/// The dashboard, the JSON API and the operator controls of one
/// [`Registry`], as an axum [`Router`].
///
/// Build it with [`Admin::builder`], then mount [`router`](Admin::router)
/// under any path. See the [crate documentation](crate) for the routes.
/// Cheap to clone; every clone serves the same registry and feed.
#[derive(Clone)]
pub struct Admin {
    shared: Arc<Shared>,
}

pub(crate) struct Shared {
    source: Box<dyn Source>,
    feed: EventFeed,
    pub(crate) token: Option<Token>,
    /// Fleet-wide writes, for a coordinated registry.
    pub(crate) fleet: Option<Box<dyn Fleet>>,
    coordinated: bool,
    sample_interval: Duration,
    sampler_started: AtomicBool,
}

/// A registry of any mode, seen through what the admin needs of it.
trait Source: Send + Sync + 'static {
    /// Every breaker, in creation order: handles for the reads that do not
    /// depend on the mode.
    fn breakers(&self) -> Vec<CircuitBreaker>;
    /// The view of `name`, its times on a clock reading `feed_now` ms.
    fn view(&self, name: &str, feed_now: u64) -> Option<BreakerView>;
    fn apply(
        &self,
        name: &str,
        action: Action,
        feed_now: u64,
    ) -> Option<(State, State, BreakerView)>;
}

impl<M: Mode> Source for Registry<M> {
    fn breakers(&self) -> Vec<CircuitBreaker> {
        self.items().into_iter().map(|(_, b)| b).collect()
    }

    fn view(&self, name: &str, feed_now: u64) -> Option<BreakerView> {
        self.get_existing(name)
            .map(|b| BreakerView::of(&b, feed_now))
    }

    fn apply(
        &self,
        name: &str,
        action: Action,
        feed_now: u64,
    ) -> Option<(State, State, BreakerView)> {
        // Never `get`: an unknown name must not create a breaker.
        let breaker = self.get_existing(name)?;
        let from = breaker.state();
        match action {
            Action::ForceOpen => breaker.force_open(),
            Action::Disable => breaker.disable(),
            Action::MetricsOnly => breaker.metrics_only(),
            Action::Reset => breaker.reset(),
        }
        Some((from, breaker.state(), BreakerView::of(&breaker, feed_now)))
    }
}

/// An operator control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    ForceOpen,
    Disable,
    MetricsOnly,
    Reset,
}

impl Action {
    const ALL: [Action; 4] = [
        Action::ForceOpen,
        Action::Disable,
        Action::MetricsOnly,
        Action::Reset,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Action::ForceOpen => "force_open",
            Action::Disable => "disable",
            Action::MetricsOnly => "metrics_only",
            Action::Reset => "reset",
        }
    }

    fn route(self) -> &'static str {
        match self {
            Action::ForceOpen => "/breakers/{name}/force-open",
            Action::Disable => "/breakers/{name}/disable",
            Action::MetricsOnly => "/breakers/{name}/metrics-only",
            Action::Reset => "/breakers/{name}/reset",
        }
    }
}

impl Admin {
    /// A builder for the admin of `registry` (any mode: local, blocking or
    /// async coordinated).
    ///
    /// ```
    /// use interlock::Registry;
    /// use interlock_admin::{Admin, EventFeed};
    ///
    /// let feed = EventFeed::new();
    /// let registry = Registry::builder().listener(feed.clone()).build()?;
    /// let admin = Admin::builder(registry).feed(feed).bearer_token("s3cret-token").build()?;
    /// assert!(admin.has_controls());
    /// let app: axum::Router = admin.mount(axum::Router::new(), "/interlock")?;
    /// # drop(app);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder<M: Mode>(registry: Registry<M>) -> AdminBuilder<M> {
        AdminBuilder {
            registry,
            feed: None,
            token: None,
            sample_interval: Duration::from_secs(1),
        }
    }

    /// The routes, to mount with `Router::nest` (or `merge` at the root);
    /// [`mount`](Self::mount) also answers the page's URL with a trailing
    /// slash, which `nest` does not.
    ///
    /// Relative to the mount point:
    ///
    /// | route | answer |
    /// |---|---|
    /// | `GET /` | the dashboard (its scripts and stylesheet are `GET /?asset=app.js`, `?asset=card.js` and `?asset=style.css`) |
    /// | `GET /breakers` | `{"now": ms, "controls": bool, "coordinated": bool, "fleet_controls": bool, "breakers": [...]}` |
    /// | `GET /breakers/{name}` | one breaker, or 404 |
    /// | `GET /breakers/{name}/history` | its timeline since it was created (within the feed's history), or 404 |
    /// | `GET /events` | the server-sent events the dashboard listens to |
    /// | `POST /breakers/{name}/force-open`, `/disable`, `/metrics-only`, `/reset` | only with a bearer token configured |
    /// | `POST /breakers/{name}/fleet/trip?version=N`, `/fleet/close?version=N` | only with a bearer token and a coordinated registry |
    ///
    /// Called inside a tokio runtime, it starts the sampler at once;
    /// otherwise the first request does.
    ///
    /// ```
    /// use axum::{Router, body::Body, http::{Request, StatusCode}};
    /// use tower::ServiceExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let registry = interlock::Registry::new();
    /// let _ = registry.get("payments");
    /// let admin = interlock_admin::Admin::builder(registry).build()?;
    /// let app: Router = Router::new().nest("/interlock", admin.router());
    ///
    /// let response = app.clone().oneshot(Request::get("/interlock/breakers").body(Body::empty())?).await?;
    /// assert_eq!(response.status(), StatusCode::OK);
    /// // No token configured: the operator routes do not exist.
    /// let response = app.oneshot(Request::post("/interlock/breakers/payments/reset").body(Body::empty())?).await?;
    /// assert_eq!(response.status(), StatusCode::NOT_FOUND);
    /// # Ok(())
    /// # }
    /// ```
    pub fn router<S>(&self) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        self.shared.ensure_sampler();
        let mut router = Router::new()
            .route("/", get(index))
            .route("/breakers", get(list))
            .route("/breakers/{name}", get(one))
            .route("/breakers/{name}/history", get(history))
            .route("/events", get(events));
        if self.shared.token.is_some() {
            for action in Action::ALL {
                router = router.route(
                    action.route(),
                    post(
                        move |state: AxumState<Arc<Shared>>,
                              headers: HeaderMap,
                              path: Result<Path<String>, PathRejection>| {
                            act(state, headers, path, action)
                        },
                    ),
                );
            }
            if self.shared.fleet.is_some() {
                for write in FleetWrite::ALL {
                    router = router.route(
                        write.route(),
                        post(
                            move |state: AxumState<Arc<Shared>>,
                                  headers: HeaderMap,
                                  path: Result<Path<String>, PathRejection>,
                                  query: RawQuery| {
                                fleet::act(state, headers, path, query, write)
                            },
                        ),
                    );
                }
            }
        }
        router.with_state(Arc::clone(&self.shared))
    }

    /// Mounts the [routes](Self::router) at `path` of `app` (`"/interlock"`:
    /// the page is then at `/interlock` and `/interlock/` alike; `"/"`
    /// merges them at the root).
    ///
    /// ```
    /// use axum::{Router, body::Body, http::{Request, StatusCode}};
    /// use tower::ServiceExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let admin = interlock_admin::Admin::builder(interlock::Registry::new()).build()?;
    /// let app: Router = admin.mount(Router::new(), "/interlock")?;
    /// for page in ["/interlock", "/interlock/"] {
    ///     let response = app.clone().oneshot(Request::get(page).body(Body::empty())?).await?;
    ///     assert_eq!(response.status(), StatusCode::OK);
    /// }
    /// assert!(admin.mount(Router::<()>::new(), "interlock").is_err());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`BuildError::InvalidMountPath`] for a path that does not start with
    /// `/`, ends with `/`, has an empty segment, a route parameter or a
    /// wildcard (`{`, `}`, `*`), a space or a control character.
    pub fn mount<S>(&self, app: Router<S>, path: &str) -> Result<Router<S>, BuildError>
    where
        S: Clone + Send + Sync + 'static,
    {
        if path == "/" {
            return Ok(app.merge(self.router()));
        }
        let invalid = |reason| BuildError::InvalidMountPath {
            path: path.to_owned(),
            reason,
        };
        if !path.starts_with('/') {
            return Err(invalid("it must start with `/`"));
        }
        if path.ends_with('/') {
            return Err(invalid("it must not end with `/` (both forms are served)"));
        }
        if path.contains("//") {
            return Err(invalid("it has an empty segment"));
        }
        if path.contains(['{', '}', '*']) {
            return Err(invalid("route parameters and wildcards are not allowed"));
        }
        if !path.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(invalid("only visible ASCII characters, no spaces"));
        }
        let shared = Arc::clone(&self.shared);
        let with_slash = get(move |query: RawQuery| index(AxumState(Arc::clone(&shared)), query));
        Ok(app
            .nest(path, self.router())
            .route(&format!("{path}/"), with_slash))
    }

    /// Whether the operator routes exist (a bearer token is configured).
    #[must_use]
    pub fn has_controls(&self) -> bool {
        self.shared.token.is_some()
    }

    /// Whether the fleet-wide routes exist (a bearer token is configured
    /// and the registry is coordinated).
    #[must_use]
    pub fn has_fleet_controls(&self) -> bool {
        self.shared.token.is_some() && self.shared.fleet.is_some()
    }

    /// The feed the dashboard reads.
    #[must_use]
    pub fn feed(&self) -> &EventFeed {
        &self.shared.feed
    }

    /// Takes one sample of every breaker now, as the sampler does every
    /// [`sample_interval`](AdminBuilder::sample_interval), and sends what
    /// changed to every open dashboard.
    ///
    /// ```
    /// use interlock::{ManualClock, Registry};
    /// use interlock_admin::{Admin, EventFeed};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let feed = EventFeed::builder().clock(clock.clone()).build()?;
    /// let registry = Registry::builder().clock(clock.clone()).listener(feed.clone()).build()?;
    /// let admin = Admin::builder(registry.clone()).feed(feed.clone()).build()?;
    /// for _ in 0..60 {
    ///     let _ = registry.get("search").call(|| Ok::<_, std::io::Error>(()));
    ///     clock.advance(Duration::from_secs(1));
    ///     admin.sample_now(); // a minute of history, drawn at once
    /// }
    /// assert_eq!(feed.last_state("search"), Some(interlock::State::Closed));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sample_now(&self) {
        self.shared.sample();
    }
}

impl fmt::Debug for Admin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admin")
            .field("feed", &self.shared.feed)
            .field("controls", &self.shared.token.is_some())
            .field("coordinated", &self.shared.coordinated)
            .field("sample_interval", &self.shared.sample_interval)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Admin`]; every check happens in [`build`](Self::build).
#[must_use]
pub struct AdminBuilder<M> {
    registry: Registry<M>,
    feed: Option<EventFeed>,
    token: Option<String>,
    sample_interval: Duration,
}

impl<M: Mode> fmt::Debug for AdminBuilder<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminBuilder")
            .field("registry", &self.registry)
            .field("feed", &self.feed)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("sample_interval", &self.sample_interval)
            .finish()
    }
}

impl<M: Mode> AdminBuilder<M> {
    /// The feed the registry reports to (add the same feed, or a clone, with
    /// `RegistryBuilder::listener`). Without it the dashboard still works,
    /// but sees state changes only at the next sample.
    pub fn feed(mut self, feed: EventFeed) -> Self {
        self.feed = Some(feed);
        self
    }

    /// Enables the operator routes, which then require
    /// `Authorization: Bearer <token>`. Without a token they do not exist.
    /// For a coordinated registry this includes the fleet-wide ones.
    ///
    /// Use a long random secret (32 characters or more); only visible
    /// ASCII characters are accepted.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// How often every breaker is sampled for the timelines and the live
    /// updates (default 1 s).
    pub fn sample_interval(mut self, interval: Duration) -> Self {
        self.sample_interval = interval;
        self
    }

    /// Builds the admin.
    ///
    /// # Errors
    ///
    /// [`BuildError::InvalidToken`] for an empty token or one with spaces or
    /// non-ASCII characters, [`BuildError::InvalidSampleInterval`] for an
    /// interval outside 10 ms ..= 60 s.
    pub fn build(self) -> Result<Admin, BuildError> {
        let token = self.token.as_deref().map(Token::new).transpose()?;
        if self.sample_interval < Duration::from_millis(10)
            || self.sample_interval > Duration::from_secs(60)
        {
            return Err(BuildError::InvalidSampleInterval {
                interval: self.sample_interval,
            });
        }
        let fleet = self.registry.coordinator().and_then(fleet::of);
        Ok(Admin {
            shared: Arc::new(Shared {
                coordinated: self.registry.is_coordinated(),
                source: Box::new(self.registry),
                feed: self.feed.unwrap_or_default(),
                token,
                fleet,
                sample_interval: self.sample_interval,
                sampler_started: AtomicBool::new(false),
            }),
        })
    }
}

impl FleetHost for Shared {
    fn token(&self) -> Option<&Token> {
        self.token.as_ref()
    }
    fn view(&self, name: &str) -> Option<BreakerView> {
        Shared::view(self, name)
    }
    fn fleet(&self) -> Option<&dyn Fleet> {
        self.fleet.as_deref()
    }
    fn feed(&self) -> &FeedInner {
        Shared::feed(self)
    }
}

impl Shared {
    pub(crate) fn feed(&self) -> &FeedInner {
        &self.feed.inner
    }

    /// The view of `name`, if the registry has it.
    pub(crate) fn view(&self, name: &str) -> Option<BreakerView> {
        self.source.view(name, self.feed().now_ms())
    }

    fn sample(&self) {
        // The registry is listed before the feed's lock is taken (a
        // breaker being created may report to the feed).
        let feed = self.feed();
        let epoch = feed.begin_sample();
        let breakers = self.source.breakers();
        feed.sample(epoch, || breakers.iter().map(Reading::of).collect());
    }

    /// Starts the sampler on the current tokio runtime, once. It holds only
    /// a weak reference and ends when the last router and `Admin` are gone.
    fn ensure_sampler(self: &Arc<Self>) {
        if self.sampler_started.load(Ordering::Acquire) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.sampler_started.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(self);
        let interval = self.sample_interval;
        runtime.spawn(run_sampler(weak, interval));
    }

    fn header(&self) -> InitHeader {
        InitHeader {
            sample_interval_secs: secs(self.sample_interval),
            controls: self.token.is_some(),
            coordinated: self.coordinated,
            fleet_controls: self.token.is_some() && self.fleet.is_some(),
        }
    }

    /// The `init` message, and a receiver of everything after it.
    fn subscribe(&self) -> (broadcast::Receiver<Arc<Message>>, String) {
        let feed = self.feed();
        let epoch = feed.begin_sample();
        let breakers = self.source.breakers();
        feed.subscribe(
            epoch,
            || breakers.iter().map(Reading::of).collect(),
            self.header(),
        )
    }
}

async fn run_sampler(shared: Weak<Shared>, interval: Duration) {
    // The first sample one interval after the start, not at once: every
    // page, list and stream takes a fresh sample of its own when it is
    // served, and an immediate tick, whenever the runtime got to it, raced
    // with whatever the caller did right after mounting (the stream test
    // `a_breaker_the_registry_does_not_list_leaves_the_stream` saw a stray
    // breaker's track sampled away before it could read it).
    let start = tokio::time::Instant::now() + interval;
    let mut ticker = tokio::time::interval_at(start, interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticker.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.sample();
    }
}

#[derive(Serialize)]
struct List {
    now: u64,
    controls: bool,
    coordinated: bool,
    fleet_controls: bool,
    breakers: Vec<BreakerView>,
}

#[derive(Serialize)]
struct HistoryReply {
    now: u64,
    name: String,
    #[serde(flatten)]
    history: History,
}

/// `GET /`: the page, or one of its assets (`?asset=app.js`,
/// `?asset=card.js`, `?asset=style.css`). Assets hang off the page's own
/// URL so that they resolve under any mount point, with or without a
/// trailing slash.
async fn index(AxumState(shared): AxumState<Arc<Shared>>, RawQuery(query): RawQuery) -> Response {
    shared.ensure_sampler();
    let (body, content_type) = match query.as_deref() {
        None | Some("") => (INDEX_HTML, "text/html; charset=utf-8"),
        Some("asset=app.js") => (APP_JS, "text/javascript; charset=utf-8"),
        Some("asset=card.js") => (CARD_JS, "text/javascript; charset=utf-8"),
        Some("asset=style.css") => (STYLE_CSS, "text/css; charset=utf-8"),
        Some(_) => return error(StatusCode::NOT_FOUND, "no such asset"),
    };
    let mut response = with_common_headers(body.into_response(), content_type);
    let headers = response.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// `GET /breakers`.
async fn list(AxumState(shared): AxumState<Arc<Shared>>) -> Response {
    shared.ensure_sampler();
    let now = shared.feed().now_ms();
    let header = shared.header();
    json(
        StatusCode::OK,
        &List {
            now,
            controls: header.controls,
            coordinated: header.coordinated,
            fleet_controls: header.fleet_controls,
            breakers: shared
                .source
                .breakers()
                .iter()
                .map(|b| BreakerView::of(b, now))
                .collect(),
        },
    )
}

/// `GET /breakers/{name}`.
async fn one(
    AxumState(shared): AxumState<Arc<Shared>>,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    shared.ensure_sampler();
    let Ok(Path(name)) = path else {
        return error(StatusCode::NOT_FOUND, "no such breaker");
    };
    match shared.view(&name) {
        Some(view) => json(StatusCode::OK, &view),
        None => error(StatusCode::NOT_FOUND, "no such breaker"),
    }
}

/// `GET /breakers/{name}/history`: what a card draws when it opens.
async fn history(
    AxumState(shared): AxumState<Arc<Shared>>,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    shared.ensure_sampler();
    let Ok(Path(name)) = path else {
        return error(StatusCode::NOT_FOUND, "no such breaker");
    };
    if shared.view(&name).is_none() {
        return error(StatusCode::NOT_FOUND, "no such breaker");
    }
    let feed = shared.feed();
    json(
        StatusCode::OK,
        &HistoryReply {
            now: feed.now_ms(),
            history: feed.history_of(&name),
            name,
        },
    )
}

/// `GET /events`: `init` (every breaker as a compact row, and the recent
/// activity), then `delta` (the rows that changed, once per sample
/// interval, only when something did) and `event` (state changes, resets,
/// storage outages, operator actions, removals). A dashboard that falls
/// behind gets a fresh `init`.
async fn events(
    AxumState(shared): AxumState<Arc<Shared>>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    shared.ensure_sampler();
    let (receiver, init) = shared.subscribe();
    let start = Connection::Init {
        shared,
        receiver,
        init,
    };
    let stream = stream::unfold(start, |state| async move {
        match state {
            Connection::Init {
                shared,
                receiver,
                init,
            } => {
                let event = SseEvent::default().event("init").data(init);
                Some((Ok(event), Connection::Live { shared, receiver }))
            }
            Connection::Live {
                shared,
                mut receiver,
            } => match receiver.recv().await {
                Ok(message) => {
                    let event = SseEvent::default().event(message.event).data(&message.data);
                    Some((Ok(event), Connection::Live { shared, receiver }))
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    drop(receiver);
                    let (receiver, init) = shared.subscribe();
                    let event = SseEvent::default().event("init").data(init);
                    Some((Ok(event), Connection::Live { shared, receiver }))
                }
                Err(broadcast::error::RecvError::Closed) => None,
            },
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// Where one SSE connection is.
enum Connection {
    Init {
        shared: Arc<Shared>,
        receiver: broadcast::Receiver<Arc<Message>>,
        init: String,
    },
    Live {
        shared: Arc<Shared>,
        receiver: broadcast::Receiver<Arc<Message>>,
    },
}

/// `POST /breakers/{name}/<action>`: the token first (401 and nothing
/// happens), then the name (404 for an unknown one, which is not created).
async fn act(
    AxumState(shared): AxumState<Arc<Shared>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    action: Action,
) -> Response {
    shared.ensure_sampler();
    let name = path.ok().map(|Path(name)| name);
    if let Some(refused) = refuse(
        shared.token.as_ref(),
        &headers,
        action.as_str(),
        name.as_deref(),
    ) {
        return refused;
    }
    let Some(name) = name else {
        return error(StatusCode::NOT_FOUND, "no such breaker");
    };
    let now = shared.feed().now_ms();
    let Some((from, to, view)) = shared.source.apply(&name, action, now) else {
        tracing::warn!(
            target: "interlock_admin",
            action = action.as_str(),
            breaker = ?name,
            "operator action on an unknown breaker"
        );
        return error(StatusCode::NOT_FOUND, "no such breaker");
    };
    tracing::info!(
        target: "interlock_admin",
        action = action.as_str(),
        breaker = ?name,
        from = from.as_str(),
        to = to.as_str(),
        "operator action"
    );
    shared
        .feed()
        .record_action(&name, action.as_str(), from.as_str(), to.as_str(), None);
    json(StatusCode::OK, &view)
}
