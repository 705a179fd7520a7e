//! The middleware in a real `reqwest` client against a real HTTP server on
//! loopback.
#![allow(clippy::unwrap_used, reason = "test helpers: a failure fails the test")]

#[path = "../../../interlock/tests/http/server.rs"]
mod server;

use std::time::Duration;

use interlock::http::{BuildError, HttpStatusClassifier, NameError};
use interlock::{CircuitOpenError, Config, ManualClock, Registry, SlidingWindow, State};
use interlock_reqwest::{
    CircuitBreakerMiddleware, CircuitBreakerMiddlewareBuilder, HostOnly, rejection,
};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

use server::{TestServer, closed_addr};

const WAIT: Duration = Duration::from_secs(10);

fn tight(clock: &ManualClock) -> CircuitBreakerMiddlewareBuilder {
    CircuitBreakerMiddleware::builder()
        .config(
            Config::builder()
                .minimum_number_of_calls(2)
                .sliding_window(SlidingWindow::count(2))
                .wait_duration_in_open(Duration::from_secs(1))
                .permitted_calls_in_half_open(1)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
}

fn client<M: interlock::mode::AsyncApi>(
    middleware: &CircuitBreakerMiddleware<M>,
) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest::Client::new())
        .with(middleware.clone())
        .build()
}

async fn status(client: &ClientWithMiddleware, url: &str) -> u16 {
    client.get(url).send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn hosts_are_isolated_and_a_rejection_never_reaches_the_server() {
    let (failing, healthy) = (TestServer::start(), TestServer::start());
    let middleware = tight(&ManualClock::new()).build().unwrap();
    let client = client(&middleware);
    for _ in 0..2 {
        assert_eq!(status(&client, &failing.url("/status/503")).await, 503);
    }
    let breaker = middleware.registry().get_existing(&failing.name()).unwrap();
    assert_eq!(breaker.state(), State::Open);

    let err = client
        .get(failing.url("/status/200"))
        .send()
        .await
        .unwrap_err();
    // reqwest-middleware's own error type, holding the rejection
    assert!(err.is_middleware());
    let reqwest_middleware::Error::Middleware(inner) = &err else {
        panic!("{err:?}")
    };
    let open = inner.downcast_ref::<CircuitOpenError>().unwrap();
    assert_eq!(open.breaker_name(), failing.name());
    assert!(open.retry_after().is_some());
    assert_eq!(rejection(&err).unwrap().state(), State::Open);
    assert_eq!(failing.hits(), 2, "the rejected request was never sent");

    assert_eq!(status(&client, &healthy.url("/status/200")).await, 200);
    assert_eq!(
        middleware.registry().names(),
        [failing.name(), healthy.name()]
    );

    // 127.0.0.1 and localhost are two hosts
    assert_eq!(status(&client, &failing.localhost_url("/")).await, 200);
    assert_eq!(failing.hits(), 3);
}

#[tokio::test]
async fn statuses_transport_errors_and_caller_bugs_are_classified() {
    let server = TestServer::start();
    let middleware = CircuitBreakerMiddleware::builder()
        .initial_state(State::MetricsOnly)
        .build()
        .unwrap();
    let client = client(&middleware);
    for code in [200, 204, 404, 418, 501] {
        assert_eq!(
            status(&client, &server.url(&format!("/status/{code}"))).await,
            code
        );
    }
    for code in [429, 500, 502, 503, 504] {
        status(&client, &server.url(&format!("/status/{code}"))).await;
    }
    let breaker = middleware.registry().get(&server.name());
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.total_calls, snapshot.failed_calls), (10, 5));

    // an unsupported scheme: reqwest's builder error, the caller's bug
    let err = client
        .get(format!("ftp://{}/", server.addr().ip()))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_builder(), "{err:?}");
    let ftp = middleware
        .registry()
        .get(&format!("{}:21", server.addr().ip()));
    assert_eq!(ftp.snapshot().total_calls, 1);
    assert_eq!(ftp.snapshot().failed_calls, 0);

    // nothing listens: a transport error is a failure
    let closed = closed_addr();
    let err = client
        .get(format!("http://{closed}/"))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    let refused = middleware.registry().get(&closed.to_string());
    assert_eq!(refused.snapshot().failed_calls, 1);
    assert!(refused.last_failure().is_some());

    // the statuses are configurable
    let middleware = CircuitBreakerMiddleware::builder()
        .initial_state(State::MetricsOnly)
        .classifier(HttpStatusClassifier::new().failure_statuses([408]))
        .build()
        .unwrap();
    let client = self::client(&middleware);
    status(&client, &server.url("/status/408")).await;
    status(&client, &server.url("/status/503")).await;
    let snapshot = middleware.registry().get(&server.name()).snapshot();
    assert_eq!((snapshot.total_calls, snapshot.failed_calls), (2, 1));
}

#[tokio::test]
async fn a_custom_resolver_names_the_breakers_and_a_blank_name_is_refused() {
    let server = TestServer::start();
    let middleware = tight(&ManualClock::new())
        .name_resolver(|r: &reqwest::Request| {
            let mut segments = r.url().path_segments().unwrap();
            format!("svc-{}", segments.next().unwrap_or_default())
        })
        .build()
        .unwrap();
    let client = client(&middleware);
    for _ in 0..2 {
        status(&client, &server.url("/status/500")).await;
    }
    let err = client
        .get(server.url("/status/200"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(rejection(&err).unwrap().breaker_name(), "svc-status");
    assert_eq!(status(&client, &server.url("/delay/0")).await, 200);
    assert_eq!(middleware.registry().names(), ["svc-status", "svc-delay"]);

    let middleware = CircuitBreakerMiddleware::builder()
        .name_resolver(|_: &reqwest::Request| String::new())
        .build()
        .unwrap();
    let url = server.url("/x");
    let err = self::client(&middleware)
        .get(&url)
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        interlock_reqwest::name_error(&err),
        Some(&NameError::BlankName { url: url.clone() })
    );
    assert!(err.to_string().contains(&url), "{err}");
    assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn a_dropped_in_flight_probe_hands_its_slot_back() {
    let server = TestServer::start();
    let clock = ManualClock::new();
    let middleware = tight(&clock).build().unwrap();
    let client = client(&middleware);
    for _ in 0..2 {
        status(&client, &server.url("/status/503")).await;
    }
    let breaker = middleware.registry().get(&server.name());
    clock.advance(Duration::from_secs(1));

    let probe = tokio::spawn(client.get(server.url("/hang")).send());
    assert!(server.wait_for_hits_async(3, WAIT).await);
    assert_eq!(breaker.probes().in_flight, 1);
    let err = client.get(server.url("/")).send().await.unwrap_err();
    assert_eq!(rejection(&err).unwrap().state(), State::HalfOpen);

    probe.abort();
    assert!(probe.await.unwrap_err().is_cancelled());
    assert_eq!(breaker.probes().in_flight, 0);
    assert_eq!(breaker.probes().completed, 0);
    assert_eq!(status(&client, &server.url("/")).await, 200);
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test]
async fn metrics_only_rollout_counts_but_never_rejects() {
    let server = TestServer::start();
    let middleware = tight(&ManualClock::new())
        .initial_state(State::MetricsOnly)
        .build()
        .unwrap();
    let client = client(&middleware);
    for _ in 0..10 {
        assert_eq!(status(&client, &server.url("/status/502")).await, 502);
    }
    assert_eq!(server.hits(), 10);
    let breaker = middleware.registry().get_existing(&server.name()).unwrap();
    assert_eq!(breaker.state(), State::MetricsOnly);
    assert_eq!(breaker.snapshot().failed_calls, 2);
}

#[tokio::test]
async fn the_call_ends_at_the_headers_and_the_body_streams_outside_it() {
    let server = TestServer::start();
    let middleware = CircuitBreakerMiddleware::new();
    let client = client(&middleware);
    let mut response = client.get(server.url("/slow-body")).send().await.unwrap();
    let breaker = middleware.registry().get(&server.name());
    assert_eq!(breaker.snapshot().total_calls, 1, "recorded at the headers");
    assert_eq!(response.chunk().await.unwrap().unwrap(), "first chunk");
    assert!(
        tokio::time::timeout(Duration::from_millis(50), response.chunk())
            .await
            .is_err()
    );
    drop(response);
    assert_eq!(breaker.snapshot().total_calls, 1);
}

#[tokio::test]
async fn an_owned_registry_closes_with_the_last_clone_a_shared_one_stays_open() {
    let server = TestServer::start();
    let middleware = CircuitBreakerMiddleware::new();
    let client = client(&middleware);
    status(&client, &server.url("/")).await;
    let breaker = middleware.registry().get(&server.name());
    drop(middleware);
    assert!(!breaker.is_shut_down(), "the client still holds a clone");
    drop(client);
    assert!(breaker.is_shut_down());

    let shared = Registry::new();
    let a = CircuitBreakerMiddleware::builder()
        .registry(shared.clone())
        .build()
        .unwrap();
    let b = CircuitBreakerMiddleware::builder()
        .registry(shared.clone())
        .build()
        .unwrap();
    status(&client_for(&a), &server.url("/")).await;
    status(&client_for(&b), &server.url("/")).await;
    assert_eq!(shared.get(&server.name()).snapshot().total_calls, 2);
    a.close();
    drop((a, b));
    assert!(!shared.get(&server.name()).is_shut_down());

    let err = CircuitBreakerMiddleware::builder()
        .initial_state(State::MetricsOnly)
        .registry(shared)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::SharedRegistry {
            option: "initial_state"
        }
    );
}

fn client_for(middleware: &CircuitBreakerMiddleware) -> ClientWithMiddleware {
    client(middleware)
}

#[tokio::test]
async fn a_coordinated_registry_shares_each_hosts_breaker_across_instances() {
    use interlock::storage::{Coordinator, MemoryStorage};

    let server = TestServer::start();
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder().clock(clock.clone()).build();
    // Two instances of a service: each its own coordinator and middleware,
    // one storage between them (Redis in production).
    let instance = || {
        let lane = Coordinator::manual_async(storage.clone());
        let registry = Registry::builder()
            .config(
                Config::builder()
                    .minimum_number_of_calls(2)
                    .sliding_window(SlidingWindow::count(2))
                    .build()
                    .unwrap(),
            )
            .clock(clock.clone())
            .coordinator(&lane)
            .build()
            .unwrap();
        let middleware = CircuitBreakerMiddleware::builder()
            .registry(registry)
            .build()
            .unwrap();
        (lane, middleware)
    };
    let ((lane_a, a), (lane_b, b)) = (instance(), instance());
    let (on_a, on_b) = (client(&a), client(&b));
    assert_eq!(status(&on_b, &server.url("/status/200")).await, 200);
    for _ in 0..2 {
        assert_eq!(status(&on_a, &server.url("/status/503")).await, 503);
    }
    lane_a.run_writes().await; // A's trip reaches the storage...
    lane_b.run_writes().await; // ...and its notice B's breaker for the host
    let err = on_b
        .get(server.url("/status/200"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(rejection(&err).unwrap().breaker_name(), server.name());
    assert_eq!(server.hits(), 3, "B never sent the rejected request");
    let on_b_breaker = b.registry().get_existing(&server.name()).unwrap();
    assert!(on_b_breaker.is_coordinated());
    assert_eq!(on_b_breaker.state(), State::Open);
}

// ---- issue 24: the rejection in the chain, no retry into an open host -------

/// Trips the breaker of `server` with two 503s.
async fn trip(client: &ClientWithMiddleware, server: &TestServer) {
    for _ in 0..2 {
        assert_eq!(status(client, &server.url("/status/503")).await, 503);
    }
}

#[tokio::test]
async fn the_rejection_is_the_errors_source_and_a_retry_never_sends_into_it() {
    use interlock::pipeline::backon::{is_open, unless_open};
    use interlock::pipeline::{ManualSleeper, Pipeline, Retry};
    use std::error::Error;
    let server = TestServer::start();
    let clock = ManualClock::new();
    let middleware = tight(&clock).build().unwrap();
    let client = client(&middleware);
    trip(&client, &server).await;

    let err = client
        .get(server.url("/status/200"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "GET {} not sent: its host's circuit is open",
            server.url("/status/200")
        )
    );
    let source = err
        .source()
        .unwrap()
        .downcast_ref::<CircuitOpenError>()
        .unwrap();
    assert_eq!(source.breaker_name(), server.name());
    assert_eq!(rejection(&err).unwrap().breaker_name(), server.name());
    assert!(interlock::find_rejection(&err).is_some());
    assert!(!unless_open(&err) && is_open(&err));

    // UnlessOpen around the client: one attempt, nothing sent.
    let pipeline = Pipeline::builder()
        .retry(
            Retry::builder(5)
                .sleeper(ManualSleeper::new(clock))
                .build()
                .unwrap(),
        )
        .build();
    let hits = server.hits();
    let url = server.url("/status/200");
    let result = pipeline.call_async(|| client.get(&url).send()).await;
    assert!(result.unwrap_err().find_rejection().is_some());
    assert_eq!(server.hits(), hits, "the open host was never asked");
}

/// A middleware inside ours that rejects on its own (another breaker).
struct InnerRejects(interlock::CircuitBreaker);

#[async_trait::async_trait]
impl reqwest_middleware::Middleware for InnerRejects {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut http::Extensions,
        next: reqwest_middleware::Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        match self.0.acquire() {
            Err(open) => Err(reqwest_middleware::Error::middleware(open)),
            Ok(permit) => {
                permit.success();
                next.run(request, extensions).await
            }
        }
    }
}

#[tokio::test]
async fn an_inner_breakers_rejection_is_ignored_by_the_host_breaker() {
    let server = TestServer::start();
    let middleware = tight(&ManualClock::new()).build().unwrap();
    let inner = interlock::CircuitBreaker::new("inner");
    inner.force_open();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(middleware.clone())
        .with(InnerRejects(inner))
        .build();
    for _ in 0..3 {
        let err = client
            .get(server.url("/status/200"))
            .send()
            .await
            .unwrap_err();
        assert_eq!(rejection(&err).unwrap().breaker_name(), "inner");
    }
    let host = middleware.registry().get_existing(&server.name()).unwrap();
    assert_eq!(host.snapshot().total_calls, 0);
    assert_eq!(host.state(), State::Closed);
}

#[tokio::test]
async fn host_only_names_breakers_by_host_as_the_python_original() {
    let (a, b) = (TestServer::start(), TestServer::start());
    let middleware = tight(&ManualClock::new())
        .name_resolver(HostOnly)
        .build()
        .unwrap();
    let client = client(&middleware);
    // Two ports of one host share the breaker named by the host alone.
    status(&client, &a.url("/status/500")).await;
    status(&client, &b.url("/status/500")).await;
    assert_eq!(middleware.registry().names(), ["127.0.0.1"]);
    let err = client.get(a.url("/status/200")).send().await.unwrap_err();
    assert_eq!(rejection(&err).unwrap().breaker_name(), "127.0.0.1");
    let v6 = format!("http://[::1]:{}/status/200", a.addr().port());
    let _ = client.get(&v6).send().await; // refused or not: only the name matters
    assert_eq!(middleware.registry().names(), ["127.0.0.1", "::1"]);
}

// ---- issue 25: behind reqwest-retry, a shed connector slot ------------------

/// A client with `reqwest-retry`'s standard middleware *outside* the breaker
/// (every attempt is its own breaker call), retrying transient failures at
/// once (no real waiting in the tests).
fn retrying_client(middleware: &CircuitBreakerMiddleware, retries: u32) -> ClientWithMiddleware {
    use reqwest_retry::{RetryTransientMiddleware, policies::ExponentialBackoff};
    let policy = ExponentialBackoff::builder()
        .retry_bounds(Duration::from_millis(1), Duration::from_millis(1))
        .build_with_max_retries(retries);
    ClientBuilder::new(reqwest::Client::new())
        .with(RetryTransientMiddleware::new_with_policy(policy))
        .with(middleware.clone())
        .build()
}

#[tokio::test]
async fn the_rejection_is_found_behind_reqwest_retry() {
    let server = TestServer::start();
    let middleware = tight(&ManualClock::new()).build().unwrap();

    // Retried until the breaker opens under the retries: 503, 503, then the
    // third attempt is rejected (reqwest-retry reports it "after 2 retries").
    let client = retrying_client(&middleware, 5);
    let err = client
        .get(server.url("/status/503"))
        .send()
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("retries"),
        "reqwest-retry's own error: {err}"
    );
    let open = rejection(&err).expect("the rejection under RetryError::WithRetries");
    assert_eq!(open.breaker_name(), server.name());
    assert!(interlock::find_rejection(&err).is_some());
    assert_eq!(server.hits(), 2, "the rejected attempt was never sent");

    // Rejected on the first attempt (RetryError::Error, no retries).
    let err = client
        .get(server.url("/status/200"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(rejection(&err).unwrap().breaker_name(), server.name());
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn a_rejection_names_the_request_it_refused_without_its_query() {
    let server = TestServer::start();
    let middleware = tight(&ManualClock::new()).build().unwrap();
    let client = client(&middleware);
    trip(&client, &server).await;
    let err = client
        .post(server.url("/orders?token=secret"))
        .send()
        .await
        .unwrap_err();
    let shown = format!("{err:#}");
    assert!(
        shown.contains(&format!("POST {}", server.url("/orders"))),
        "{shown}"
    );
    assert!(!shown.contains("secret"), "{shown}");
    assert!(rejection(&err).is_some());
}

/// A connector whose every connection slot is taken: tower's load shedder
/// over a concurrency limit of zero, the shape of reqwest's documented
/// `connector_layer` connection limit with shedding instead of waiting.
fn shedding_client(middleware: &CircuitBreakerMiddleware) -> ClientWithMiddleware {
    // Each connector layer wraps the ones before it: the shedder goes
    // outside the limit.
    let reqwest = reqwest::Client::builder()
        .connector_layer(tower::limit::ConcurrencyLimitLayer::new(0))
        .connector_layer(tower::load_shed::LoadShedLayer::new())
        .build()
        .unwrap();
    ClientBuilder::new(reqwest).with(middleware.clone()).build()
}

#[tokio::test]
async fn a_request_shed_before_it_was_sent_is_an_inconclusive_probe() {
    let server = TestServer::start();
    let clock = ManualClock::new();
    // Two probes a round: one inconclusive probe hands its slot back (R9.3)
    // without ending the round (R9.4 ends it at two).
    let middleware = CircuitBreakerMiddleware::builder()
        .config(
            Config::builder()
                .minimum_number_of_calls(2)
                .sliding_window(SlidingWindow::count(2))
                .wait_duration_in_open(Duration::from_secs(1))
                .permitted_calls_in_half_open(2)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .build()
        .unwrap();
    trip(&client(&middleware), &server).await;
    let breaker = middleware.registry().get_existing(&server.name()).unwrap();
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_secs(2));

    // The probe never got a connection: the breaker learns nothing, the slot
    // goes back, the breaker stays HALF_OPEN (today's code re-opened it).
    let err = shedding_client(&middleware)
        .get(server.url("/status/200"))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(server.hits(), 2, "nothing reached the server");

    // Real probes still decide.
    for _ in 0..2 {
        assert_eq!(
            status(&client(&middleware), &server.url("/status/200")).await,
            200
        );
    }
    assert_eq!(breaker.state(), State::Closed);

    // In CLOSED a shed request counts against the host, as the original's
    // PoolTimeout does (an exhausted pool is usually the host holding
    // connections open).
    let before = breaker.snapshot().failed_calls;
    let _ = shedding_client(&middleware)
        .get(server.url("/status/200"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(breaker.snapshot().failed_calls, before + 1);
}
