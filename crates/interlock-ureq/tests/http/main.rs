//! The middleware in a real `ureq` agent against a real HTTP server on
//! loopback.
#![allow(clippy::unwrap_used, reason = "test helpers: a failure fails the test")]

#[path = "../../../interlock/tests/http/server.rs"]
mod server;

use std::io::Read;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use interlock::http::{BuildError, HttpStatusClassifier, NameError};
use interlock::{CircuitOpenError, Config, ManualClock, Registry, SlidingWindow, State};
use interlock_ureq::{
    CircuitBreakerMiddleware, CircuitBreakerMiddlewareBuilder, HostOnly, rejection,
};
use ureq::Agent;
use ureq::http::request::Parts;

use server::{TestServer, closed_addr};

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

/// An agent that returns every status as a response.
fn agent<M: interlock::mode::SyncApi>(middleware: &CircuitBreakerMiddleware<M>) -> Agent {
    Agent::config_builder()
        .http_status_as_error(false)
        .middleware(middleware.clone())
        .build()
        .new_agent()
}

fn status(agent: &Agent, url: &str) -> u16 {
    agent.get(url).call().unwrap().status().as_u16()
}

#[test]
fn hosts_are_isolated_and_a_rejection_never_reaches_the_server() {
    let (failing, healthy) = (TestServer::start(), TestServer::start());
    let middleware = tight(&ManualClock::new()).build().unwrap();
    let agent = agent(&middleware);
    for _ in 0..2 {
        assert_eq!(status(&agent, &failing.url("/status/503")), 503);
    }
    let breaker = middleware.registry().get_existing(&failing.name()).unwrap();
    assert_eq!(breaker.state(), State::Open);

    let err = agent.get(failing.url("/status/200")).call().unwrap_err();
    // ureq's own error type, holding the rejection
    let ureq::Error::Other(inner) = &err else {
        panic!("{err:?}")
    };
    let open = inner.downcast_ref::<CircuitOpenError>().unwrap();
    assert_eq!(open.breaker_name(), failing.name());
    assert_eq!(rejection(&err).unwrap().state(), State::Open);
    assert_eq!(failing.hits(), 2, "the rejected request was never sent");

    assert_eq!(status(&agent, &healthy.url("/status/200")), 200);
    // 127.0.0.1 and localhost are two hosts
    assert_eq!(status(&agent, &failing.localhost_url("/")), 200);
    assert_eq!(failing.hits(), 3);
    let localhost = format!("localhost:{}", failing.addr().port());
    assert_eq!(
        middleware.registry().names(),
        [failing.name(), healthy.name(), localhost]
    );
}

#[test]
fn statuses_transport_errors_and_caller_bugs_are_classified() {
    let server = TestServer::start();
    let middleware = CircuitBreakerMiddleware::builder()
        .initial_state(State::MetricsOnly)
        .build()
        .unwrap();
    let agent = agent(&middleware);
    for code in [200, 204, 404, 418, 501] {
        assert_eq!(
            status(&agent, &server.url(&format!("/status/{code}"))),
            code
        );
    }
    for code in [429, 500, 502, 503, 504] {
        status(&agent, &server.url(&format!("/status/{code}")));
    }
    let breaker = middleware.registry().get(&server.name());
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.total_calls, snapshot.failed_calls), (10, 5));

    // ureq's default: statuses >= 400 come back as `Error::StatusCode`
    let erroring = Agent::config_builder()
        .middleware(middleware.clone())
        .build()
        .new_agent();
    let err = erroring.get(server.url("/status/404")).call().unwrap_err();
    assert!(matches!(err, ureq::Error::StatusCode(404)));
    let err = erroring.get(server.url("/status/503")).call().unwrap_err();
    assert!(matches!(err, ureq::Error::StatusCode(503)));
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.total_calls, snapshot.failed_calls), (12, 6));
    assert_eq!(breaker.last_failure().unwrap().message(), err.to_string());

    // nothing listens: a transport error is a failure
    let closed = closed_addr();
    let err = agent.get(format!("http://{closed}/")).call().unwrap_err();
    assert!(matches!(err, ureq::Error::Io(_)), "{err:?}");
    let refused = middleware.registry().get(&closed.to_string());
    assert_eq!(refused.snapshot().failed_calls, 1);

    // the caller's bug: a scheme ureq cannot speak
    let err = agent
        .get(format!("ftp://{}/", server.addr().ip()))
        .call()
        .unwrap_err();
    assert!(matches!(err, ureq::Error::BadUri(_)), "{err:?}");
    let ftp = middleware.registry().get(&server.addr().ip().to_string());
    let snapshot = ftp.snapshot();
    assert_eq!((snapshot.total_calls, snapshot.failed_calls), (1, 0));

    // the statuses are configurable
    let middleware = CircuitBreakerMiddleware::builder()
        .initial_state(State::MetricsOnly)
        .classifier(HttpStatusClassifier::new().failure_statuses([408]))
        .build()
        .unwrap();
    let agent = self::agent(&middleware);
    status(&agent, &server.url("/status/408"));
    status(&agent, &server.url("/status/503"));
    let snapshot = middleware.registry().get(&server.name()).snapshot();
    assert_eq!((snapshot.total_calls, snapshot.failed_calls), (2, 1));
}

#[test]
fn a_custom_resolver_names_the_breakers_and_bad_names_are_refused_before_io() {
    let server = TestServer::start();
    let middleware = tight(&ManualClock::new())
        .name_resolver(|r: &Parts| {
            let path = r.uri.path().trim_start_matches('/');
            format!("svc-{}", path.split('/').next().unwrap_or_default())
        })
        .build()
        .unwrap();
    let agent = agent(&middleware);
    for _ in 0..2 {
        status(&agent, &server.url("/status/500"));
    }
    let err = agent.get(server.url("/status/200")).call().unwrap_err();
    assert_eq!(rejection(&err).unwrap().breaker_name(), "svc-status");
    assert_eq!(status(&agent, &server.url("/delay/0")), 200);
    assert_eq!(middleware.registry().names(), ["svc-status", "svc-delay"]);

    let middleware = CircuitBreakerMiddleware::builder()
        .name_resolver(|_: &Parts| " ".to_owned())
        .build()
        .unwrap();
    let url = server.url("/x");
    let err = self::agent(&middleware).get(&url).call().unwrap_err();
    assert_eq!(
        interlock_ureq::name_error(&err),
        Some(&NameError::BlankName { url: url.clone() })
    );
    assert!(err.to_string().contains(&url), "{err}");
    assert_eq!(server.hits(), 3);
}

#[test]
fn a_request_without_a_host_is_refused_before_io() {
    let middleware = CircuitBreakerMiddleware::new();
    let err = agent(&middleware).get("/relative").call().unwrap_err();
    assert!(
        matches!(
            interlock_ureq::name_error(&err),
            Some(NameError::MissingHost { .. })
        ),
        "{err:?}"
    );
    assert!(middleware.registry().is_empty());
}

#[test]
fn an_unwinding_probe_hands_its_slot_back() {
    let server = TestServer::start();
    let clock = ManualClock::new();
    let middleware = tight(&clock).build().unwrap();
    // a middleware inside the breaker that panics on demand
    let explode = Arc::new(AtomicBool::new(false));
    let trigger = explode.clone();
    let agent = Agent::config_builder()
        .http_status_as_error(false)
        .middleware(middleware.clone())
        .middleware(
            move |request: ureq::http::Request<ureq::SendBody<'_>>,
                  next: ureq::middleware::MiddlewareNext<'_>| {
                assert!(!trigger.load(Ordering::SeqCst), "a bug inside the call");
                next.handle(request)
            },
        )
        .build()
        .new_agent();
    for _ in 0..2 {
        status(&agent, &server.url("/status/503"));
    }
    let breaker = middleware.registry().get(&server.name());
    clock.advance(Duration::from_secs(1));

    explode.store(true, Ordering::SeqCst);
    let unwound = catch_unwind(AssertUnwindSafe(|| agent.get(server.url("/")).call()));
    assert!(unwound.is_err());
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(breaker.probes().in_flight, 0);
    assert_eq!(breaker.probes().completed, 0);

    explode.store(false, Ordering::SeqCst);
    assert_eq!(status(&agent, &server.url("/")), 200);
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(server.hits(), 3);
}

#[test]
fn a_hanging_probe_holds_its_slot_until_the_agent_gives_up() {
    let server = TestServer::start();
    let clock = ManualClock::new();
    let middleware = tight(&clock).build().unwrap();
    let agent = Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_millis(300)))
        .middleware(middleware.clone())
        .build()
        .new_agent();
    for _ in 0..2 {
        status(&agent, &server.url("/status/503"));
    }
    let breaker = middleware.registry().get(&server.name());
    clock.advance(Duration::from_secs(1));

    let (probe_agent, url) = (agent.clone(), server.url("/hang"));
    let probe = std::thread::spawn(move || probe_agent.get(url).call());
    assert!(server.wait_for_hits(3, Duration::from_secs(10)));
    let err = agent.get(server.url("/")).call().unwrap_err();
    assert_eq!(rejection(&err).unwrap().state(), State::HalfOpen);

    // the agent's timeout is a transport failure: the probe fails, reopening
    assert!(matches!(
        probe.join().unwrap(),
        Err(ureq::Error::Timeout(_))
    ));
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(server.hits(), 3);
}

#[test]
fn metrics_only_rollout_counts_but_never_rejects() {
    let server = TestServer::start();
    let middleware = tight(&ManualClock::new())
        .initial_state(State::MetricsOnly)
        .build()
        .unwrap();
    let agent = agent(&middleware);
    for _ in 0..10 {
        assert_eq!(status(&agent, &server.url("/status/504")), 504);
    }
    assert_eq!(server.hits(), 10);
    let breaker = middleware.registry().get_existing(&server.name()).unwrap();
    assert_eq!(breaker.state(), State::MetricsOnly);
    assert_eq!(breaker.snapshot().failed_calls, 2);
}

#[test]
fn the_call_ends_at_the_headers_and_the_body_streams_outside_it() {
    let server = TestServer::start();
    let middleware = CircuitBreakerMiddleware::new();
    let agent = Agent::config_builder()
        .middleware(middleware.clone())
        .timeout_recv_body(Some(Duration::from_millis(100)))
        .build()
        .new_agent();
    let mut response = agent.get(server.url("/slow-body")).call().unwrap();
    let breaker = middleware.registry().get(&server.name());
    assert_eq!(breaker.snapshot().total_calls, 1, "recorded at the headers");
    let mut reader = response.body_mut().as_reader();
    let mut first = [0u8; 11];
    reader.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"first chunk");
    // the rest never comes: the body read fails, outside the call
    let mut rest = Vec::new();
    assert!(reader.read_to_end(&mut rest).is_err());
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.total_calls, snapshot.failed_calls), (1, 0));
}

#[test]
fn an_owned_registry_closes_with_the_last_clone_a_shared_one_stays_open() {
    let server = TestServer::start();
    let middleware = CircuitBreakerMiddleware::new();
    let agent = agent(&middleware);
    status(&agent, &server.url("/"));
    let breaker = middleware.registry().get(&server.name());
    drop(middleware);
    assert!(!breaker.is_shut_down(), "the agent still holds a clone");
    drop(agent);
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
    status(&self::agent(&a), &server.url("/"));
    status(&self::agent(&b), &server.url("/"));
    assert_eq!(shared.get(&server.name()).snapshot().total_calls, 2);
    a.close();
    drop((a, b));
    assert!(!shared.get(&server.name()).is_shut_down());

    let err = CircuitBreakerMiddleware::builder()
        .registry(shared)
        .clock(ManualClock::new())
        .build()
        .unwrap_err();
    assert_eq!(err, BuildError::SharedRegistry { option: "clock" });
}

#[test]
fn a_coordinated_registry_shares_each_hosts_breaker_across_instances() {
    use interlock::storage::{Coordinator, MemoryStorage};

    let server = TestServer::start();
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder().clock(clock.clone()).build();
    // Two instances of a service: each its own coordinator and middleware,
    // one storage between them (Redis in production).
    let instance = || {
        let lane = Coordinator::manual(storage.clone());
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
    let (on_a, on_b) = (agent(&a), agent(&b));
    assert_eq!(status(&on_b, &server.url("/status/200")), 200);
    for _ in 0..2 {
        assert_eq!(status(&on_a, &server.url("/status/503")), 503);
    }
    lane_a.run_writes(); // A's trip reaches the storage...
    lane_b.run_writes(); // ...and its notice B's breaker for the host
    let err = on_b.get(server.url("/status/200")).call().unwrap_err();
    assert_eq!(rejection(&err).unwrap().breaker_name(), server.name());
    assert_eq!(server.hits(), 3, "B never sent the rejected request");
    let on_b_breaker = b.registry().get_existing(&server.name()).unwrap();
    assert!(on_b_breaker.is_coordinated());
    assert_eq!(on_b_breaker.state(), State::Open);
}

// ---- issue 24: the rejection found in a ureq::Error, no retry into it --------

#[test]
fn a_retry_around_the_agent_never_sends_into_an_open_host() {
    use interlock::pipeline::backon::{is_open, unless_open};
    use interlock::pipeline::{ManualSleeper, Pipeline, Retry};
    let server = TestServer::start();
    let clock = ManualClock::new();
    let middleware = tight(&clock).build().unwrap();
    let agent = agent(&middleware);
    for _ in 0..2 {
        assert_eq!(status(&agent, &server.url("/status/503")), 503);
    }
    let err = agent.get(server.url("/status/200")).call().unwrap_err();
    assert_eq!(rejection(&err).unwrap().breaker_name(), server.name());
    assert_eq!(
        interlock::find_rejection(&err).unwrap().breaker_name(),
        server.name()
    );
    assert!(!unless_open(&err) && is_open(&err));

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
    let attempts = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = attempts.clone();
    let result = pipeline.call(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        agent.get(&url).call().map(|_| ())
    });
    assert!(result.unwrap_err().find_rejection().is_some());
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert_eq!(server.hits(), hits, "the open host was never asked");
}

#[test]
fn host_only_names_breakers_by_host_as_the_python_original() {
    let (a, b) = (TestServer::start(), TestServer::start());
    let middleware = tight(&ManualClock::new())
        .name_resolver(HostOnly)
        .build()
        .unwrap();
    let agent = agent(&middleware);
    status(&agent, &a.url("/status/500"));
    status(&agent, &b.url("/status/500"));
    assert_eq!(middleware.registry().names(), ["127.0.0.1"]);
    let err = agent.get(a.url("/status/200")).call().unwrap_err();
    assert_eq!(rejection(&err).unwrap().breaker_name(), "127.0.0.1");
}
