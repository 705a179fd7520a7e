//! The tower adapter against `tower-test` mocks and a real hyper server.
#![cfg(feature = "tower")]
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use interlock::tower::{BoxError, CircuitBreaker, CircuitBreakerLayer};
use interlock::{
    CircuitBreaker as Breaker, CircuitOpenError, Config, ManualClock, SlidingWindow, State,
};
use tower::{Layer, Service, ServiceExt};
use tower_test::{assert_request_eq, mock};

#[derive(Debug)]
struct Upstream(&'static str);

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Upstream {}

fn breaker(clock: &ManualClock) -> Breaker {
    Breaker::builder("upstream")
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
        .build()
        .unwrap()
}

#[tokio::test]
async fn records_on_resolve_rejects_in_call_never_in_poll_ready() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    let (service, mut handle) = mock::pair::<&'static str, &'static str>();
    let mut svc = CircuitBreakerLayer::new(breaker.clone()).layer(service);

    // two upstream failures trip the breaker, counted when they resolve
    for _ in 0..2 {
        let fut = svc.ready().await.unwrap().call("req");
        assert_request_eq!(handle, "req").send_error(Upstream("502"));
        let err = fut.await.unwrap_err();
        assert_eq!(err.downcast_ref::<Upstream>().unwrap().0, "502");
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.last_failure().unwrap().message(), "502");

    // still ready: the rejection is a per-request error from call()
    handle.allow(1);
    svc.ready().await.unwrap();
    let err: BoxError = svc.call("req").await.unwrap_err();
    let open = err.downcast_ref::<CircuitOpenError>().unwrap();
    assert_eq!(open.breaker_name(), "upstream");
    assert!(
        tokio::time::timeout(Duration::from_millis(10), handle.next_request())
            .await
            .is_err()
    );

    // a probe's response future dropped before it resolves hands the slot back
    clock.advance(Duration::from_secs(1));
    let fut = svc.ready().await.unwrap().call("probe");
    assert_eq!(breaker.probes().in_flight, 1);
    drop(fut);
    let _abandoned = handle.next_request().await; // the request had gone out
    assert_eq!(breaker.probes().in_flight, 0);
    assert_eq!(breaker.probes().completed, 0);

    // a successful probe closes it
    handle.allow(1);
    let fut = svc.ready().await.unwrap().call("probe");
    assert_request_eq!(handle, "probe").send_response("ok");
    assert_eq!(fut.await.unwrap(), "ok");
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test]
async fn the_service_contract() {
    let breaker = Breaker::new("contract");
    let (service, mut handle) = mock::pair::<u8, u8>();
    let mut svc = CircuitBreaker::new(service, breaker.clone());

    // readiness is the inner service's
    handle.allow(0);
    let mut task = tokio_test_ready(&mut svc);
    assert!(task.is_none());
    handle.allow(1);
    task = tokio_test_ready(&mut svc);
    assert!(matches!(task, Some(Ok(()))));

    // clones share the breaker
    let clone = svc.clone();
    assert!(clone.breaker().ptr_eq(&breaker));
    let _ = svc.get_ref();
    let _ = svc.get_mut();
    let _inner = svc.into_inner();
}

fn tokio_test_ready<S: Service<u8>>(svc: &mut S) -> Option<Result<(), S::Error>> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match svc.poll_ready(&mut cx) {
        std::task::Poll::Ready(r) => Some(r),
        std::task::Poll::Pending => None,
    }
}

mod hyper_server {
    use super::*;
    use http_body_util::{BodyExt, Empty, Full};
    use hyper::body::Bytes;
    use hyper::{Request, Response, StatusCode};
    use hyper_util::rt::TokioIo;
    use tokio::net::{TcpListener, TcpStream};

    /// A real HTTP server on a random loopback port: 500 while `failing`.
    pub(super) async fn serve(
        failing: Arc<AtomicU32>,
        hits: Arc<AtomicU32>,
    ) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            // bounded: the test makes a handful of requests
            for _ in 0..32 {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let failing = failing.clone();
                let hits = hits.clone();
                tokio::spawn(async move {
                    let service =
                        hyper::service::service_fn(move |_req: Request<hyper::body::Incoming>| {
                            hits.fetch_add(1, Ordering::SeqCst);
                            let status = if failing.load(Ordering::SeqCst) > 0 {
                                StatusCode::INTERNAL_SERVER_ERROR
                            } else {
                                StatusCode::OK
                            };
                            async move {
                                Ok::<_, Infallible>(
                                    Response::builder()
                                        .status(status)
                                        .body(Full::new(Bytes::from_static(b"stock: 3")))
                                        .unwrap(),
                                )
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        addr
    }

    /// One GET on a fresh connection; a 5xx is an error.
    async fn get(addr: std::net::SocketAddr) -> Result<String, BoxError> {
        let stream = TcpStream::connect(addr).await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let req = Request::get(format!("http://{addr}/stock"))
            .header("host", addr.to_string())
            .body(Empty::<Bytes>::new())?;
        let res = sender.send_request(req).await?;
        if res.status().is_server_error() {
            return Err(format!("upstream answered {}", res.status()).into());
        }
        let body = res.into_body().collect().await?.to_bytes();
        Ok(String::from_utf8(body.to_vec())?)
    }

    #[tokio::test]
    async fn guards_a_real_hyper_client() {
        let failing = Arc::new(AtomicU32::new(1));
        let hits = Arc::new(AtomicU32::new(0));
        let addr = serve(failing.clone(), hits.clone()).await;
        let clock = ManualClock::new();
        let breaker = breaker(&clock);
        let client = tower::ServiceBuilder::new()
            .layer(CircuitBreakerLayer::new(breaker.clone()))
            .service(tower::service_fn(move |()| get(addr)));

        for _ in 0..2 {
            let err = client.clone().oneshot(()).await.unwrap_err();
            assert_eq!(
                err.to_string(),
                "upstream answered 500 Internal Server Error"
            );
        }
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(hits.load(Ordering::SeqCst), 2);

        let err = client.clone().oneshot(()).await.unwrap_err();
        assert!(err.is::<CircuitOpenError>());
        assert_eq!(hits.load(Ordering::SeqCst), 2, "rejected without a request");

        failing.store(0, Ordering::SeqCst);
        clock.advance(Duration::from_secs(1));
        assert_eq!(client.clone().oneshot(()).await.unwrap(), "stock: 3");
        assert_eq!(breaker.state(), State::Closed);
        assert_eq!(hits.load(Ordering::SeqCst), 3);
    }
}

/// Issue 25: the one-breaker layer judges `Ok` responses with a response
/// classifier; hyper-util's client answers a 500 with `Ok`, so without one
/// five 500s left the breaker CLOSED.
#[cfg(feature = "http")]
mod response_classification {
    use super::*;
    use http_body_util::{BodyExt, Empty};
    use hyper::body::Bytes;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use interlock::Verdict;
    use interlock::http::HttpStatusClassifier;

    fn five_call_breaker(clock: &ManualClock) -> Breaker {
        Breaker::builder("upstream")
            .config(
                Config::builder()
                    .minimum_number_of_calls(5)
                    .sliding_window(SlidingWindow::count(5))
                    .wait_duration_in_open(Duration::from_secs(1))
                    .permitted_calls_in_half_open(1)
                    .build()
                    .unwrap(),
            )
            .clock(clock.clone())
            .build()
            .unwrap()
    }

    fn get(addr: std::net::SocketAddr) -> hyper::Request<Empty<Bytes>> {
        hyper::Request::get(format!("http://{addr}/stock"))
            .body(Empty::new())
            .unwrap()
    }

    #[tokio::test]
    async fn five_500s_from_a_real_hyper_client_open_the_breaker() {
        let failing = Arc::new(AtomicU32::new(1));
        let hits = Arc::new(AtomicU32::new(0));
        let addr = super::hyper_server::serve(failing.clone(), hits.clone()).await;
        let clock = ManualClock::new();
        let breaker = five_call_breaker(&clock);
        let hyper_client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let client = tower::ServiceBuilder::new()
            .layer(
                CircuitBreakerLayer::new(breaker.clone())
                    .classify_response(HttpStatusClassifier::new()),
            )
            .service(hyper_client);

        for _ in 0..5 {
            let response = client.clone().oneshot(get(addr)).await.unwrap();
            assert_eq!(response.status(), 500, "returned to the caller as is");
        }
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(
            breaker.last_failure().unwrap().message(),
            "HTTP 500 Internal Server Error"
        );
        let err = client.clone().oneshot(get(addr)).await.unwrap_err();
        assert!(err.is::<CircuitOpenError>());
        assert_eq!(hits.load(Ordering::SeqCst), 5, "rejected before any I/O");

        // Recovery: the probe's 200 is a success.
        failing.store(0, Ordering::SeqCst);
        clock.advance(Duration::from_secs(1));
        let response = client.clone().oneshot(get(addr)).await.unwrap();
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"stock: 3");
        assert_eq!(breaker.state(), State::Closed);
    }

    #[tokio::test]
    async fn a_closure_classifier_and_the_default_over_a_real_hyper_client() {
        let failing = Arc::new(AtomicU32::new(1));
        let hits = Arc::new(AtomicU32::new(0));
        let addr = super::hyper_server::serve(failing.clone(), hits.clone()).await;
        let hyper_client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();

        // The default judges every response a success: 500s stay CLOSED.
        let plain = five_call_breaker(&ManualClock::new());
        let client = CircuitBreakerLayer::new(plain.clone()).layer(hyper_client.clone());
        for _ in 0..5 {
            client.clone().oneshot(get(addr)).await.unwrap();
        }
        assert_eq!(plain.state(), State::Closed);
        assert_eq!(plain.snapshot().failed_calls, 0);

        // A closure: every 5xx fails.
        let judged = five_call_breaker(&ManualClock::new());
        let client = CircuitBreakerLayer::new(judged.clone())
            .classify_response(|r: &hyper::Response<hyper::body::Incoming>| {
                if r.status().is_server_error() {
                    Verdict::Failure
                } else {
                    Verdict::Success
                }
            })
            .layer(hyper_client);
        for _ in 0..5 {
            client.clone().oneshot(get(addr)).await.unwrap();
        }
        assert_eq!(judged.state(), State::Open);
        assert_eq!(judged.snapshot().failed_calls, 5);
        assert_eq!(
            judged.last_failure().unwrap().message(),
            "the response was classified as a failure"
        );
    }
}

/// An echo service counting the requests that reached it (for the layers'
/// modules).
#[cfg(feature = "tokio")]
fn echo(
    reached: &Arc<AtomicU32>,
) -> impl Service<String, Response = String, Error = std::io::Error, Future: Send> + Clone {
    let reached = reached.clone();
    tower::service_fn(move |req: String| {
        reached.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, std::io::Error>(req) }
    })
}

#[cfg(feature = "tokio")]
mod chaos;
#[cfg(feature = "tokio")]
mod hedge;
#[cfg(all(feature = "governor", feature = "tokio"))]
mod rate_limit;
