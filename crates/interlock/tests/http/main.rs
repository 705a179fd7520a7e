//! The keyed tower layer around hyper-util's real client, against a real
//! HTTP server on loopback.
#![cfg(feature = "http")]
#![allow(clippy::unwrap_used, reason = "test helpers: a failure fails the test")]

mod server;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use interlock::http::{
    BuildError, HttpStatusClassifier, KeyedCircuitBreakerLayer, KeyedCircuitBreakerLayerBuilder,
    NameError,
};
use interlock::pipeline::{BoxError, Bulkhead, Pipeline, bulkhead};
use interlock::{CircuitOpenError, Config, ManualClock, Registry, SlidingWindow, State};
use tower::{Layer, Service, ServiceExt};

use server::{TestServer, closed_addr};

type Request = http::Request<Empty<Bytes>>;
type Response = http::Response<Incoming>;

const WAIT: Duration = Duration::from_secs(10);

fn client() -> Client<HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

fn request(url: &str) -> Request {
    http::Request::get(url).body(Empty::new()).unwrap()
}

/// Two calls fill the window; one failure of two trips; one probe decides.
fn tight_config() -> Config {
    Config::builder()
        .minimum_number_of_calls(2)
        .sliding_window(SlidingWindow::count(2))
        .wait_duration_in_open(Duration::from_secs(1))
        .permitted_calls_in_half_open(1)
        .build()
        .unwrap()
}

fn tight(clock: &ManualClock) -> KeyedCircuitBreakerLayerBuilder {
    KeyedCircuitBreakerLayer::builder()
        .config(tight_config())
        .clock(clock.clone())
}

async fn send<S>(svc: &mut S, url: &str) -> Result<Response, BoxError>
where
    S: Service<Request, Response = Response, Error = BoxError>,
{
    svc.ready().await?.call(request(url)).await
}

async fn status<S>(svc: &mut S, url: &str) -> u16
where
    S: Service<Request, Response = Response, Error = BoxError>,
{
    send(svc, url).await.unwrap().status().as_u16()
}

fn rejection(err: &BoxError) -> &CircuitOpenError {
    err.downcast_ref::<CircuitOpenError>()
        .unwrap_or_else(|| panic!("not a rejection: {err}"))
}

#[tokio::test]
async fn hosts_are_isolated_and_a_rejection_never_reaches_the_server() {
    let (failing, healthy) = (TestServer::start(), TestServer::start());
    let layer = tight(&ManualClock::new()).build().unwrap();
    let mut svc = layer.layer(client());

    for _ in 0..2 {
        assert_eq!(status(&mut svc, &failing.url("/status/503")).await, 503);
    }
    assert_eq!(failing.hits(), 2);
    let breaker = layer.registry().get_existing(&failing.name()).unwrap();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        breaker.last_failure().unwrap().message(),
        "503 Service Unavailable"
    );

    let err = send(&mut svc, &failing.url("/status/200"))
        .await
        .unwrap_err();
    let open = rejection(&err);
    assert_eq!(open.breaker_name(), failing.name());
    assert_eq!(open.state(), State::Open);
    assert_eq!(failing.hits(), 2, "the rejected request was never sent");

    // the other host (another port) is untouched
    assert_eq!(status(&mut svc, &healthy.url("/status/200")).await, 200);
    assert_eq!(healthy.hits(), 1);
    assert_eq!(layer.registry().names(), [failing.name(), healthy.name()]);
}

#[tokio::test]
async fn the_same_server_under_another_host_name_has_its_own_breaker() {
    let server = TestServer::start();
    let layer = tight(&ManualClock::new()).build().unwrap();
    let mut svc = layer.layer(client());
    for _ in 0..2 {
        status(&mut svc, &server.url("/status/500")).await;
    }
    assert!(send(&mut svc, &server.url("/")).await.is_err());
    assert_eq!(status(&mut svc, &server.localhost_url("/")).await, 200);
    let localhost = format!("localhost:{}", server.addr().port());
    assert_eq!(
        layer.registry().get_existing(&localhost).unwrap().state(),
        State::Closed
    );
}

#[tokio::test]
async fn statuses_and_transport_errors_are_classified() {
    let server = TestServer::start();
    let layer = KeyedCircuitBreakerLayer::builder()
        .initial_state(State::MetricsOnly)
        .build()
        .unwrap();
    let mut svc = layer.layer(client());
    for code in [200, 201, 301, 400, 404, 408, 501, 505] {
        assert_eq!(
            status(&mut svc, &server.url(&format!("/status/{code}"))).await,
            code
        );
    }
    let breaker = layer.registry().get(&server.name());
    assert_eq!(breaker.snapshot().failed_calls, 0);
    for code in [429, 500, 502, 503, 504] {
        status(&mut svc, &server.url(&format!("/status/{code}"))).await;
    }
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.total_calls, snapshot.failed_calls), (13, 5));

    // nothing listens: a transport error, returned as the client's own
    let closed = closed_addr();
    let err = send(&mut svc, &format!("http://{closed}/"))
        .await
        .unwrap_err();
    assert!(
        err.downcast_ref::<hyper_util::client::legacy::Error>()
            .unwrap()
            .is_connect()
    );
    let refused = layer.registry().get(&closed.to_string());
    assert_eq!(refused.snapshot().failed_calls, 1);

    // the statuses are configurable
    let layer = KeyedCircuitBreakerLayer::builder()
        .initial_state(State::MetricsOnly)
        .classifier(HttpStatusClassifier::new().failure_statuses([404]))
        .build()
        .unwrap();
    let mut svc = layer.layer(client());
    status(&mut svc, &server.url("/status/404")).await;
    status(&mut svc, &server.url("/status/503")).await;
    let snapshot = layer.registry().get(&server.name()).snapshot();
    assert_eq!((snapshot.total_calls, snapshot.failed_calls), (2, 1));
}

#[tokio::test]
async fn caller_bugs_excluded_by_the_classifier_count_as_successes_and_are_returned() {
    // hyper-util refuses a URI without a scheme it can connect to: the
    // caller's bug, excluded here by a predicate over its error.
    let server = TestServer::start();
    let classifier = HttpStatusClassifier::new()
        .exclude_if("unsupported scheme", |e| e.to_string().contains("scheme"));
    let layer = KeyedCircuitBreakerLayer::builder()
        .config(tight_config())
        .classifier(classifier)
        .build()
        .unwrap();
    let mut svc = layer.layer(client());
    let url = format!("ftp://{}/", server.addr());
    for _ in 0..3 {
        let err = send(&mut svc, &url).await.unwrap_err();
        assert!(err.downcast_ref::<CircuitOpenError>().is_none(), "{err}");
    }
    let breaker = layer.registry().get(&server.name());
    assert_eq!(breaker.snapshot().failed_calls, 0);
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn requests_without_a_host_or_with_a_blank_name_fail_before_any_io() {
    let server = TestServer::start();
    let layer = KeyedCircuitBreakerLayer::new();
    let mut svc = layer.layer(client());
    let err = send(&mut svc, "/relative/path").await.unwrap_err();
    assert_eq!(
        *err.downcast_ref::<NameError>().unwrap(),
        NameError::MissingHost {
            url: "/relative/path".into()
        }
    );

    let layer = KeyedCircuitBreakerLayer::builder()
        .name_resolver(|_: &Request| "   ".to_owned())
        .build()
        .unwrap();
    let mut svc = layer.layer(client());
    let url = server.url("/status/200");
    let err = send(&mut svc, &url).await.unwrap_err();
    let name = err.downcast_ref::<NameError>().unwrap();
    assert_eq!(name, &NameError::BlankName { url: url.clone() });
    assert!(err.to_string().contains(&url), "{err}");
    assert_eq!(server.hits(), 0);
    assert!(layer.registry().is_empty());
}

#[tokio::test]
async fn a_custom_resolver_names_the_breakers() {
    let server = TestServer::start();
    // one gateway host, one breaker per first path segment
    let layer = tight(&ManualClock::new())
        .name_resolver(|r: &Request| {
            let segment = r.uri().path().trim_start_matches('/');
            format!("svc-{}", segment.split('/').next().unwrap_or_default())
        })
        .build()
        .unwrap();
    let mut svc = layer.layer(client());
    for _ in 0..2 {
        status(&mut svc, &server.url("/status/502")).await;
    }
    let err = send(&mut svc, &server.url("/status/200"))
        .await
        .unwrap_err();
    assert_eq!(rejection(&err).breaker_name(), "svc-status");
    assert_eq!(status(&mut svc, &server.url("/delay/0")).await, 200);
    assert_eq!(layer.registry().names(), ["svc-status", "svc-delay"]);
}

#[tokio::test]
async fn a_dropped_in_flight_probe_hands_its_slot_back() {
    let server = TestServer::start();
    let clock = ManualClock::new();
    let layer = tight(&clock).build().unwrap();
    let mut svc = layer.layer(client());
    for _ in 0..2 {
        status(&mut svc, &server.url("/status/503")).await;
    }
    let breaker = layer.registry().get(&server.name());
    assert_eq!(breaker.state(), State::Open);

    clock.advance(Duration::from_secs(1));
    let probe = tokio::spawn(svc.clone().oneshot(request(&server.url("/hang"))));
    assert!(server.wait_for_hits_async(3, WAIT).await);
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(breaker.probes().in_flight, 1);
    // the only probe slot is taken
    let err = send(&mut svc, &server.url("/status/200"))
        .await
        .unwrap_err();
    assert_eq!(rejection(&err).state(), State::HalfOpen);
    assert_eq!(server.hits(), 3);

    probe.abort();
    assert!(probe.await.unwrap_err().is_cancelled());
    assert_eq!(breaker.probes().in_flight, 0);
    assert_eq!(breaker.probes().completed, 0);

    assert_eq!(status(&mut svc, &server.url("/status/200")).await, 200);
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test]
async fn a_full_bulkhead_inside_is_inconclusive_in_half_open() {
    let server = TestServer::start();
    let clock = ManualClock::new();
    // two probes a round: one inconclusive probe alone does not end it
    let config = tight_config()
        .to_builder()
        .permitted_calls_in_half_open(2)
        .build()
        .unwrap();
    let layer = tight(&clock).config(config).build().unwrap();
    let full = full_bulkhead();
    let exhausted = Arc::new(AtomicBool::new(false));
    let (flag, http) = (exhausted.clone(), client());
    let inner = tower::service_fn(move |request: Request| {
        let (full, http, exhausted) = (full.clone(), http.clone(), flag.load(Ordering::SeqCst));
        async move {
            if exhausted {
                return Err::<Response, BoxError>(full.into());
            }
            http.request(request).await.map_err(BoxError::from)
        }
    });
    let mut svc = layer.layer(inner);
    for _ in 0..2 {
        status(&mut svc, &server.url("/status/503")).await;
    }
    let breaker = layer.registry().get(&server.name());
    clock.advance(Duration::from_secs(1));

    exhausted.store(true, Ordering::SeqCst);
    let err = send(&mut svc, &server.url("/status/200"))
        .await
        .unwrap_err();
    assert!(err.is::<bulkhead::Full>());
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(breaker.probes().inconclusive, 1);
    assert_eq!(breaker.probes().in_flight, 0);

    exhausted.store(false, Ordering::SeqCst);
    for _ in 0..2 {
        assert_eq!(status(&mut svc, &server.url("/status/200")).await, 200);
    }
    assert_eq!(breaker.state(), State::Closed);
}

/// A real `bulkhead::Full`: a nested call through a one-slot bulkhead.
fn full_bulkhead() -> bulkhead::Full {
    let pipeline = Pipeline::builder()
        .bulkhead(Bulkhead::builder(1).name("pool").build().unwrap())
        .build();
    let (tx, rx) = std::sync::mpsc::channel();
    let nested = pipeline.clone();
    pipeline
        .call(move || {
            let inner = nested.call(|| Ok::<_, std::io::Error>(()));
            tx.send(inner.map_err(interlock::PipelineError::into_boxed))
                .unwrap();
            Ok::<_, std::io::Error>(())
        })
        .unwrap();
    *rx.recv()
        .unwrap()
        .unwrap_err()
        .downcast::<bulkhead::Full>()
        .unwrap()
}

#[tokio::test]
async fn metrics_only_rollout_counts_but_never_rejects() {
    let server = TestServer::start();
    let layer = tight(&ManualClock::new())
        .initial_state(State::MetricsOnly)
        .build()
        .unwrap();
    let mut svc = layer.layer(client());
    for _ in 0..10 {
        assert_eq!(status(&mut svc, &server.url("/status/503")).await, 503);
    }
    assert_eq!(server.hits(), 10);
    let (name, breaker) = layer.registry().items().pop().unwrap();
    assert_eq!(name, server.name());
    assert_eq!(breaker.state(), State::MetricsOnly);
    assert_eq!(breaker.snapshot().failed_calls, 2); // the window holds two
}

#[tokio::test]
async fn the_call_ends_at_the_headers_and_the_body_streams_outside_it() {
    let server = TestServer::start();
    let layer = KeyedCircuitBreakerLayer::builder()
        .config(
            Config::builder()
                .slow_call_duration_threshold(Duration::from_millis(100))
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let mut svc = layer.layer(client());

    // headers and one chunk arrive, the rest of the body never does
    let response = send(&mut svc, &server.url("/slow-body")).await.unwrap();
    let breaker = layer.registry().get(&server.name());
    assert_eq!(breaker.snapshot().total_calls, 1, "recorded at the headers");
    assert_eq!(breaker.probes().in_flight, 0);
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(first, "first chunk");
    assert!(
        tokio::time::timeout(Duration::from_millis(50), body.frame())
            .await
            .is_err()
    );
    drop(body);
    assert_eq!(breaker.snapshot().failed_calls, 0);

    // the time to the headers is what counts as slow
    assert_eq!(status(&mut svc, &server.url("/delay/150")).await, 200);
    assert_eq!(breaker.snapshot().slow_calls, 1);
}

#[tokio::test]
async fn an_owned_registry_closes_with_the_last_service_a_shared_one_stays_open() {
    let server = TestServer::start();
    let layer = KeyedCircuitBreakerLayer::new();
    let mut svc = layer.layer(client());
    status(&mut svc, &server.url("/")).await;
    let breaker = layer.registry().get(&server.name());
    drop(layer);
    assert!(
        !breaker.is_shut_down(),
        "a service still holds the registry"
    );
    drop(svc);
    assert!(breaker.is_shut_down());

    let layer = KeyedCircuitBreakerLayer::new();
    let breaker = layer.registry().get("x");
    layer.close();
    assert!(breaker.is_shut_down());

    let shared = Registry::new();
    let a = KeyedCircuitBreakerLayer::builder()
        .registry(shared.clone())
        .build()
        .unwrap();
    let b = KeyedCircuitBreakerLayer::builder()
        .registry(shared.clone())
        .build()
        .unwrap();
    let (mut svc_a, mut svc_b) = (a.layer(client()), b.layer(client()));
    status(&mut svc_a, &server.url("/")).await;
    status(&mut svc_b, &server.url("/")).await;
    assert_eq!(shared.get(&server.name()).snapshot().total_calls, 2);
    a.close();
    drop((a, b, svc_a, svc_b));
    assert!(!shared.get(&server.name()).is_shut_down());

    let err = KeyedCircuitBreakerLayer::builder()
        .registry(shared)
        .config(tight_config())
        .build()
        .unwrap_err();
    assert_eq!(err, BuildError::SharedRegistry { option: "config" });
}

#[tokio::test]
async fn a_coordinated_registry_shares_each_hosts_breaker_across_instances() {
    use interlock::storage::{Coordinator, MemoryStorage};

    let server = TestServer::start();
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder().clock(clock.clone()).build();
    // Two instances of a service: each its own coordinator and layer, one
    // storage between them (Redis in production).
    let instance = || {
        let lane = Coordinator::manual(storage.clone());
        let registry = Registry::builder()
            .config(tight_config())
            .clock(clock.clone())
            .coordinator(&lane)
            .build()
            .unwrap();
        let layer = KeyedCircuitBreakerLayer::builder()
            .registry(registry)
            .build()
            .unwrap();
        (lane, layer)
    };
    let ((lane_a, a), (lane_b, b)) = (instance(), instance());
    let (mut on_a, mut on_b) = (a.layer(client()), b.layer(client()));
    assert_eq!(status(&mut on_b, &server.url("/status/200")).await, 200);
    for _ in 0..2 {
        assert_eq!(status(&mut on_a, &server.url("/status/503")).await, 503);
    }
    lane_a.run_writes(); // A's trip reaches the storage...
    lane_b.run_writes(); // ...and its notice B's breaker for the host
    let err = send(&mut on_b, &server.url("/status/200"))
        .await
        .unwrap_err();
    assert_eq!(rejection(&err).breaker_name(), server.name());
    assert_eq!(server.hits(), 3, "B never sent the rejected request");
    assert!(
        b.registry()
            .get_existing(&server.name())
            .unwrap()
            .is_coordinated()
    );
}
