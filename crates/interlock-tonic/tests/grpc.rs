//! A real tonic client and server over loopback (issue 25): generated-client
//! style calls (`Grpc::new(channel)`, path-only URIs), `grpc-status` in the
//! headers (trailers-only) and in the trailers, per-authority breakers and
//! the rejection as `UNAVAILABLE` with `grpc-retry-pushback-ms`.
#![allow(clippy::unwrap_used, reason = "test helpers: a failure fails the test")]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use interlock::{Config, ManualClock, SlidingWindow, State};
use interlock_tonic::{
    GrpcCircuitBreakerLayer, GrpcCircuitBreakerLayerBuilder, rejection, retry_pushback,
};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};
use tower::ServiceBuilder;

// ---- a byte codec: no protobuf code generation for a test service -----------

#[derive(Clone, Copy, Debug, Default)]
struct Raw;

#[derive(Debug)]
struct RawCoder;

impl Encoder for RawCoder {
    type Item = Bytes;
    type Error = Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawCoder {
    type Item = Bytes;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawCoder;
    type Decoder = RawCoder;
    fn encoder(&mut self) -> RawCoder {
        RawCoder
    }
    fn decoder(&mut self) -> RawCoder {
        RawCoder
    }
}

// ---- the test server: a real tonic server ------------------------------------

/// `/test.Echo/Call`: the request body is the gRPC code to answer with
/// ("0" echoes). `/test.Echo/Stream`: one message, then the code in the
/// trailers (so never trailers-only).
#[derive(Clone)]
struct Echo {
    hits: Arc<AtomicUsize>,
}

impl tonic::server::NamedService for Echo {
    const NAME: &'static str = "test.Echo";
}

fn code_of(request: &tonic::Request<Bytes>) -> Code {
    let text = std::str::from_utf8(request.get_ref()).unwrap_or("2");
    Code::from_i32(text.parse().unwrap_or(2))
}

#[derive(Clone)]
struct Unary;

impl tower::Service<tonic::Request<Bytes>> for Unary {
    type Response = tonic::Response<Bytes>;
    type Error = Status;
    type Future = std::future::Ready<Result<tonic::Response<Bytes>, Status>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        let code = code_of(&request);
        std::future::ready(if code == Code::Ok {
            Ok(tonic::Response::new(request.into_inner()))
        } else {
            Err(Status::new(code, "as asked"))
        })
    }
}

type Messages = Pin<Box<dyn tokio_stream::Stream<Item = Result<Bytes, Status>> + Send>>;

#[derive(Clone)]
struct Streaming;

impl tower::Service<tonic::Request<Bytes>> for Streaming {
    type Response = tonic::Response<Messages>;
    type Error = Status;
    type Future = std::future::Ready<Result<tonic::Response<Messages>, Status>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        let code = code_of(&request);
        let mut items = vec![Ok(Bytes::from_static(b"first"))];
        if code != Code::Ok {
            items.push(Err(Status::new(code, "as asked, after a message")));
        }
        let messages: Messages = Box::pin(tokio_stream::iter(items));
        std::future::ready(Ok(tonic::Response::new(messages)))
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for Echo {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Infallible>> + Send>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        self.hits.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(Raw);
            Ok(match request.uri().path() {
                "/test.Echo/Stream" => grpc.server_streaming(Streaming, request).await,
                _ => grpc.unary(Unary, request).await,
            })
        })
    }
}

struct Server {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl Server {
    async fn start() -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let echo = Echo { hits: hits.clone() };
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(echo)
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    async {
                        let _ = stopped.await;
                    },
                )
                .await
                .unwrap();
        });
        Server {
            addr,
            hits,
            _shutdown: shutdown,
        }
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect_timeout(Duration::from_secs(10))
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

// ---- helpers ------------------------------------------------------------------

fn tight(builder: GrpcCircuitBreakerLayerBuilder, clock: &ManualClock) -> GrpcCircuitBreakerLayer {
    builder
        .config(
            Config::builder()
                .minimum_number_of_calls(4)
                .sliding_window(SlidingWindow::count(4))
                .wait_duration_in_open(Duration::from_secs(30))
                .permitted_calls_in_half_open(1)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .build()
        .unwrap()
}

type Guarded = interlock_tonic::GrpcCircuitBreaker<Channel>;

/// [`client`], under a name a local variable does not shadow.
fn super_client(layer: &GrpcCircuitBreakerLayer, channel: Channel) -> tonic::client::Grpc<Guarded> {
    client(layer, channel)
}

/// What a generated client does: `Client::new(channel)`, path-only URIs.
fn client(layer: &GrpcCircuitBreakerLayer, channel: Channel) -> tonic::client::Grpc<Guarded> {
    tonic::client::Grpc::new(ServiceBuilder::new().layer(layer.clone()).service(channel))
}

async fn call(client: &mut tonic::client::Grpc<Guarded>, code: Code) -> Result<Bytes, Status> {
    client.ready().await.map_err(Status::from_error)?;
    let request = tonic::Request::new(Bytes::from((code as i32).to_string()));
    let path = http::uri::PathAndQuery::from_static("/test.Echo/Call");
    client
        .unary(request, path, Raw)
        .await
        .map(tonic::Response::into_inner)
}

/// A server stream: the first message, then the end status from the trailers.
async fn stream(
    client: &mut tonic::client::Grpc<Guarded>,
    code: Code,
) -> Result<Vec<Bytes>, Status> {
    client.ready().await.map_err(Status::from_error)?;
    let request = tonic::Request::new(Bytes::from((code as i32).to_string()));
    let path = http::uri::PathAndQuery::from_static("/test.Echo/Stream");
    let mut messages = client
        .server_streaming(request, path, Raw)
        .await?
        .into_inner();
    let mut seen = Vec::new();
    while let Some(message) = messages.message().await? {
        seen.push(message);
    }
    Ok(seen)
}

// ---- the tests ----------------------------------------------------------------

#[tokio::test]
async fn path_only_requests_use_the_channels_origin_and_unavailable_trips_it() {
    let server = Server::start().await;
    let clock = ManualClock::new();
    let endpoint = server.endpoint();
    let layer = tight(GrpcCircuitBreakerLayer::for_origin(endpoint.uri()), &clock);
    let mut client = client(&layer, endpoint.connect().await.unwrap());

    assert_eq!(&call(&mut client, Code::Ok).await.unwrap()[..], b"0");
    let name = server.addr.to_string();
    assert_eq!(layer.registry().names(), std::slice::from_ref(&name));
    let breaker = layer.registry().get_existing(&name).unwrap();
    // 1 success, then 3 UNAVAILABLE: 75% of a window of 4 opens it.
    for _ in 0..3 {
        assert_eq!(breaker.state(), State::Closed);
        let status = call(&mut client, Code::Unavailable).await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert!(rejection(&status).is_none(), "the server's own answer");
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        breaker.last_failure().unwrap().message(),
        "grpc-status 14 (Unavailable)"
    );

    // The rejection: UNAVAILABLE from the client, never sent, with the wait.
    let hits = server.hits();
    let status = call(&mut client, Code::Ok).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(status.message(), "circuit open: the request was not sent");
    assert!(
        !status.message().contains(&name),
        "no internal name in the message"
    );
    assert_eq!(
        status
            .metadata()
            .get("grpc-retry-pushback-ms")
            .unwrap()
            .to_str()
            .unwrap(),
        "30000"
    );
    assert_eq!(retry_pushback(&status), Some(Duration::from_secs(30)));
    assert_eq!(rejection(&status).unwrap().breaker_name(), name);
    assert_eq!(
        server.hits(),
        hits,
        "the rejected call never reached the server"
    );

    // The wait elapses: a successful probe closes it.
    clock.advance(Duration::from_secs(30));
    call(&mut client, Code::Ok).await.unwrap();
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test]
async fn caller_mistakes_do_not_trip_and_the_default_failure_codes_do() {
    let server = Server::start().await;
    let clock = ManualClock::new();
    let layer = tight(GrpcCircuitBreakerLayer::named("echo"), &clock);
    let mut client = client(&layer, server.endpoint().connect().await.unwrap());

    for code in [
        Code::InvalidArgument,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::Unauthenticated,
        Code::FailedPrecondition,
        Code::OutOfRange,
        Code::Unimplemented,
    ] {
        assert_eq!(call(&mut client, code).await.unwrap_err().code(), code);
    }
    let breaker = layer.registry().get_existing("echo").unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().failed_calls, 0);

    // Each default failure code, alone, trips a breaker that opens on one
    // failure.
    let channel = server.endpoint().connect().await.unwrap();
    for code in [
        Code::Unavailable,
        Code::DeadlineExceeded,
        Code::ResourceExhausted,
        Code::Internal,
        Code::Unknown,
        Code::DataLoss,
    ] {
        let layer = GrpcCircuitBreakerLayer::named("echo")
            .config(
                Config::builder()
                    .minimum_number_of_calls(1)
                    .sliding_window(SlidingWindow::count(1))
                    .build()
                    .unwrap(),
            )
            .clock(clock.clone())
            .build()
            .unwrap();
        let mut alone = super_client(&layer, channel.clone());
        assert_eq!(call(&mut alone, code).await.unwrap_err().code(), code);
        let breaker = layer.registry().get_existing("echo").unwrap();
        assert_eq!(breaker.state(), State::Open, "{code:?}");
    }
}

#[tokio::test]
async fn a_status_in_the_trailers_settles_the_call_at_the_end_of_the_stream() {
    let server = Server::start().await;
    let clock = ManualClock::new();
    let layer = tight(GrpcCircuitBreakerLayer::named("echo"), &clock);
    let mut client = client(&layer, server.endpoint().connect().await.unwrap());

    // OK in the trailers: successes.
    for _ in 0..2 {
        assert_eq!(stream(&mut client, Code::Ok).await.unwrap().len(), 1);
    }
    let breaker = layer.registry().get_existing("echo").unwrap();
    assert_eq!(breaker.snapshot().total_calls, 2);
    assert_eq!(breaker.snapshot().failed_calls, 0);

    // A message, then DATA_LOSS / UNAVAILABLE in the trailers: failures,
    // counted only once the trailers arrive.
    let status = stream(&mut client, Code::DataLoss).await.unwrap_err();
    assert_eq!(status.code(), Code::DataLoss);
    assert_eq!(breaker.snapshot().failed_calls, 1);
    assert_eq!(
        breaker.last_failure().unwrap().message(),
        "grpc-status 15 (DataLoss)"
    );
    let status = stream(&mut client, Code::Unavailable).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(breaker.state(), State::Open, "{:?}", breaker.snapshot());
    let status = stream(&mut client, Code::Ok).await.unwrap_err();
    assert!(rejection(&status).is_some());
}

#[tokio::test]
async fn requests_with_an_authority_get_that_authoritys_breaker() {
    let (a, b) = (Server::start().await, Server::start().await);
    let clock = ManualClock::new();
    let layer = tight(GrpcCircuitBreakerLayer::named("fallback"), &clock);
    // Two clients `with_origin`, each over its own channel: one breaker each.
    let guarded = |channel: Channel| ServiceBuilder::new().layer(layer.clone()).service(channel);
    let origin = |server: &Server| {
        format!("http://{}", server.addr)
            .parse::<http::Uri>()
            .unwrap()
    };
    let mut to_a = tonic::client::Grpc::with_origin(
        guarded(a.endpoint().connect().await.unwrap()),
        origin(&a),
    );
    let mut to_b = tonic::client::Grpc::with_origin(
        guarded(b.endpoint().connect().await.unwrap()),
        origin(&b),
    );
    for _ in 0..4 {
        let status = call(&mut to_a, Code::Unavailable).await.unwrap_err();
        assert!(rejection(&status).is_none());
    }
    call(&mut to_b, Code::Ok).await.unwrap();
    let mut names = layer.registry().names();
    names.sort();
    let mut expected = vec![a.addr.to_string(), b.addr.to_string()];
    expected.sort();
    assert_eq!(names, expected);
    assert_eq!(
        layer
            .registry()
            .get_existing(&a.addr.to_string())
            .unwrap()
            .state(),
        State::Open
    );
    assert_eq!(
        layer
            .registry()
            .get_existing(&b.addr.to_string())
            .unwrap()
            .state(),
        State::Closed
    );
    // b is not rejected by a's breaker
    call(&mut to_b, Code::Ok).await.unwrap();
}

#[tokio::test]
async fn a_server_that_is_gone_is_a_transport_failure() {
    let clock = ManualClock::new();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let endpoint = Endpoint::from_shared(format!("http://{closed}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5));
    let layer = tight(GrpcCircuitBreakerLayer::for_origin(endpoint.uri()), &clock);
    let mut client = client(&layer, endpoint.connect_lazy());
    for _ in 0..4 {
        let status = call(&mut client, Code::Ok).await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert!(rejection(&status).is_none());
    }
    let breaker = layer.registry().get_existing(&closed.to_string()).unwrap();
    assert_eq!(breaker.state(), State::Open);
    let status = call(&mut client, Code::Ok).await.unwrap_err();
    assert!(rejection(&status).is_some());
}

#[test]
fn a_blank_default_name_is_refused_at_build() {
    let err = GrpcCircuitBreakerLayer::named("  ").build().unwrap_err();
    assert_eq!(err, interlock_tonic::BuildError::BlankName);
    assert!(err.to_string().contains("default_name"), "{err}");
    let no_host: http::Uri = "/just/a/path".parse().unwrap();
    assert!(
        GrpcCircuitBreakerLayer::for_origin(&no_host)
            .build()
            .is_err()
    );
}

#[tokio::test]
async fn the_core_one_breaker_layer_judges_trailers_only_statuses_with_this_classifier() {
    use interlock::tower::CircuitBreakerLayer;
    use interlock_tonic::GrpcStatusClassifier;
    let server = Server::start().await;
    let breaker = interlock::CircuitBreaker::builder("echo")
        .config(
            Config::builder()
                .minimum_number_of_calls(4)
                .sliding_window(SlidingWindow::count(4))
                .build()
                .unwrap(),
        )
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let channel = ServiceBuilder::new()
        .layer(
            CircuitBreakerLayer::new(breaker.clone())
                .classify_response(GrpcStatusClassifier::new()),
        )
        .service(server.endpoint().connect().await.unwrap());
    let origin: http::Uri = format!("http://{}", server.addr).parse().unwrap();
    let mut client = tonic::client::Grpc::with_origin(channel, origin);
    // What the issue saw: 4 x UNAVAILABLE left a plain layer CLOSED.
    for _ in 0..4 {
        client.ready().await.unwrap();
        let request = tonic::Request::new(Bytes::from("14"));
        let path = http::uri::PathAndQuery::from_static("/test.Echo/Call");
        let status = client
            .unary::<_, Bytes, _>(request, path, Raw)
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        breaker.last_failure().unwrap().message(),
        "grpc-status 14 (Unavailable)"
    );
}
