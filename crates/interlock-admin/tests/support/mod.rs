//! Loopback plumbing shared by the HTTP and browser tests: serve an axum
//! app on 127.0.0.1, send real requests to it, read its event stream, and
//! poll with a deadline.
#![allow(dead_code, reason = "each test binary uses its own part of it")]
#![allow(clippy::unwrap_used, reason = "test helpers: a failure fails the test")]

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use interlock::{Config, Registry, SlidingWindow};
use interlock_admin::EventFeed;

/// How long one request, or one wait for a stream message, may take.
pub(crate) const DEADLINE: Duration = Duration::from_secs(10);

/// A registry reporting to `feed`, whose breakers trip once 4 calls were
/// seen and half of them failed, and stay open 60 s.
pub(crate) fn registry(feed: &EventFeed) -> Registry {
    Registry::builder()
        .config(
            Config::builder()
                .minimum_number_of_calls(4)
                .sliding_window(SlidingWindow::count(4))
                .wait_duration_in_open(Duration::from_secs(60))
                .build()
                .unwrap(),
        )
        .listener(feed.clone())
        .build()
        .unwrap()
}

/// Four failed calls: trips a breaker of [`registry`].
pub(crate) fn trip(registry: &Registry, name: &str) {
    let breaker = registry.get(name);
    for _ in 0..4 {
        let _ = breaker.call(|| Err::<(), _>(std::io::Error::other("connection refused")));
    }
}

/// Serves `app` on a free loopback port until the runtime ends.
pub(crate) async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    addr
}

/// A plain HTTP/1.1 client.
#[derive(Clone)]
pub(crate) struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
}

/// A whole response.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: hyper::HeaderMap,
    pub(crate) body: Bytes,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub(crate) fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a UTF-8 body")
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.text()))
    }
}

impl Http {
    pub(crate) fn new(addr: SocketAddr) -> Self {
        Http {
            client: Client::builder(TokioExecutor::new()).build_http(),
            base: format!("http://{addr}"),
        }
    }

    pub(crate) async fn get(&self, path: &str) -> Reply {
        self.send(Method::GET, path, None).await
    }

    /// `POST path`, with `Authorization: <authorization>` if given.
    pub(crate) async fn post(&self, path: &str, authorization: Option<&str>) -> Reply {
        self.send(Method::POST, path, authorization).await
    }

    async fn send(&self, method: Method, path: &str, authorization: Option<&str>) -> Reply {
        within(DEADLINE, &format!("{method} {path}"), async {
            let response = self
                .client
                .request(self.request(method.clone(), path, authorization))
                .await
                .unwrap();
            let (parts, body) = response.into_parts();
            let body = body.collect().await.unwrap().to_bytes();
            Reply {
                status: parts.status,
                headers: parts.headers,
                body,
            }
        })
        .await
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        authorization: Option<&str>,
    ) -> Request<Full<Bytes>> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        request.body(Full::new(Bytes::new())).unwrap()
    }

    /// Opens `GET path` as an event stream.
    pub(crate) async fn events(&self, path: &str) -> Events {
        let response = within(DEADLINE, "opening the event stream", async {
            self.client
                .request(self.request(Method::GET, path, None))
                .await
                .unwrap()
        })
        .await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers().get("content-type").unwrap(),
            "text/event-stream"
        );
        Events {
            body: response.into_body(),
            buffer: Vec::new(),
        }
    }
}

/// A server-sent event stream, read message by message.
pub(crate) struct Events {
    body: Incoming,
    buffer: Vec<u8>,
}

/// One message: its `event:` name and its `data:` parsed as JSON.
#[derive(Debug)]
pub(crate) struct Message {
    pub(crate) event: String,
    pub(crate) data: serde_json::Value,
    /// The size of `data` as sent, in bytes.
    pub(crate) bytes: usize,
}

impl Events {
    /// The next message (keep-alive comments skipped); panics past the
    /// deadline.
    pub(crate) async fn next(&mut self) -> Message {
        within(DEADLINE, "the next server-sent event", self.read()).await
    }

    /// Reads messages until one satisfies `wanted`; panics past the deadline.
    pub(crate) async fn until(&mut self, what: &str, wanted: impl Fn(&Message) -> bool) -> Message {
        within(DEADLINE, what, async {
            loop {
                let message = self.read().await;
                if wanted(&message) {
                    return message;
                }
            }
        })
        .await
    }

    async fn read(&mut self) -> Message {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let block = String::from_utf8(block).expect("UTF-8 events");
                let mut event = String::from("message");
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(name) = line.strip_prefix("event:") {
                        event = name.trim().to_owned();
                    } else if let Some(chunk) = line.strip_prefix("data:") {
                        if !data.is_empty() {
                            data.push('\n');
                        }
                        data.push_str(chunk.strip_prefix(' ').unwrap_or(chunk));
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                let bytes = data.len();
                let data = serde_json::from_str(&data)
                    .unwrap_or_else(|e| panic!("event data is not JSON ({e}): {data:?}"));
                return Message { event, data, bytes };
            }
            let frame = self
                .body
                .frame()
                .await
                .expect("the event stream ended")
                .unwrap();
            if let Ok(bytes) = frame.into_data() {
                self.buffer.extend_from_slice(&bytes);
            }
        }
    }
}

/// Runs `future`, panicking with `what` if it takes longer than `limit`.
pub(crate) async fn within<T>(limit: Duration, what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, future).await {
        Ok(value) => value,
        Err(_) => panic!("{what}: nothing within {limit:?}"),
    }
}

/// Polls `check` every 20 ms until it returns `Some`, panicking past `limit`.
pub(crate) async fn poll<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    within(limit, what, async {
        loop {
            if let Some(value) = check().await {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}
