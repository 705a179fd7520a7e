//! A real HTTP server on loopback for the HTTP adapter tests (shared with
//! interlock-reqwest and interlock-ureq through `#[path]`).
//!
//! It runs on its own thread and runtime, so blocking and async tests use it
//! alike, and counts every request it receives. Routes:
//!
//! - `/status/{code}`: answers `code`;
//! - `/delay/{ms}`: answers 200 after `ms` milliseconds;
//! - `/hang`: never answers;
//! - `/slow-body`: sends 200 headers and one chunk, then never ends the body;
//! - anything else: 200.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    reason = "each test crate uses part of the server; setup failures fail the test"
)]

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;

/// How many requests arrived, with a wake-up for waiters.
#[derive(Default)]
struct Hits {
    count: Mutex<usize>,
    changed: Condvar,
}

/// A running server; dropping it stops it (hanging requests included).
pub struct TestServer {
    addr: SocketAddr,
    hits: Arc<Hits>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// Starts a server on `127.0.0.1:0`.
    pub fn start() -> TestServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(Hits::default());
        let app = Router::new()
            .route("/status/{code}", get(status))
            .route("/delay/{ms}", get(delay))
            .route("/hang", get(hang))
            .route("/slow-body", get(slow_body))
            .fallback(|| async { StatusCode::OK })
            .layer(axum::middleware::from_fn_with_state(hits.clone(), count));
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tokio::select! {
                    served = axum::serve(listener, app) => served.unwrap(),
                    _ = stopped => {}
                }
            });
        });
        TestServer {
            addr,
            hits,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The breaker name the default resolver gives this server.
    pub fn name(&self) -> String {
        self.addr.to_string()
    }

    /// `http://127.0.0.1:{port}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `http://localhost:{port}{path}`: the same server under another host.
    pub fn localhost_url(&self, path: &str) -> String {
        format!("http://localhost:{}{path}", self.addr.port())
    }

    /// Requests received so far.
    pub fn hits(&self) -> usize {
        *self.hits.count.lock().unwrap()
    }

    /// Waits until at least `n` requests arrived, for at most `within`.
    pub fn wait_for_hits(&self, n: usize, within: Duration) -> bool {
        let count = self.hits.count.lock().unwrap();
        let (count, _) = self
            .hits
            .changed
            .wait_timeout_while(count, within, |count| *count < n)
            .unwrap();
        *count >= n
    }

    /// [`wait_for_hits`](Self::wait_for_hits) without blocking an async
    /// runtime's worker.
    pub async fn wait_for_hits_async(&self, n: usize, within: Duration) -> bool {
        let hits = self.hits.clone();
        tokio::task::spawn_blocking(move || {
            let count = hits.count.lock().unwrap();
            let (count, _) = hits
                .changed
                .wait_timeout_while(count, within, |count| *count < n)
                .unwrap();
            *count >= n
        })
        .await
        .unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A loopback address where nothing listens (connections are refused).
pub fn closed_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
    // dropped here: the port is closed again
}

async fn count(
    State(hits): State<Arc<Hits>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    *hits.count.lock().unwrap() += 1;
    hits.changed.notify_all();
    next.run(request).await
}

async fn status(Path(code): Path<u16>) -> StatusCode {
    StatusCode::from_u16(code).unwrap()
}

async fn delay(Path(ms): Path<u64>) -> StatusCode {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    StatusCode::OK
}

async fn hang() -> StatusCode {
    std::future::pending::<()>().await;
    StatusCode::OK
}

async fn slow_body() -> Response {
    Response::new(Body::new(OneChunkThenHang { sent: false }))
}

/// A body that yields one chunk and then never ends.
struct OneChunkThenHang {
    sent: bool,
}

impl http_body::Body for OneChunkThenHang {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if self.sent {
            Poll::Pending
        } else {
            self.sent = true;
            Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from_static(
                b"first chunk",
            )))))
        }
    }
}
