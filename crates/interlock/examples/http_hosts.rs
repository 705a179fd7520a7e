//! Two upstreams behind one hyper-util client wrapped in the keyed tower
//! layer: the failing one trips its own breaker and is answered locally;
//! the healthy one is untouched.
//!
//!     cargo run --example http_hosts --features http
#![allow(clippy::print_stdout)]

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use interlock::http::KeyedCircuitBreakerLayer;
use interlock::pipeline::BoxError;
use interlock::{CircuitOpenError, Config, SlidingWindow};
use tower::{Layer, Service, ServiceExt};

/// Serves `status` on a fresh loopback port; returns the base URL.
async fn upstream(status: StatusCode) -> Result<String, std::io::Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let app = Router::new().route("/", get(move || async move { status }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(url)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let (down, up) = (
        upstream(StatusCode::SERVICE_UNAVAILABLE).await?,
        upstream(StatusCode::OK).await?,
    );
    let layer = KeyedCircuitBreakerLayer::builder()
        .config(
            Config::builder()
                .minimum_number_of_calls(2)
                .sliding_window(SlidingWindow::count(2))
                .build()?,
        )
        .build()?;
    let mut client = layer.layer(Client::builder(TokioExecutor::new()).build_http());

    for url in [&down, &down, &down, &up] {
        let request = http::Request::get(url.as_str()).body(Empty::<Bytes>::new())?;
        match client.ready().await?.call(request).await {
            Ok(response) => println!("{url}: {}", response.status()),
            Err(err) => match err.downcast_ref::<CircuitOpenError>() {
                Some(open) => println!("{url}: rejected locally ({open})"),
                None => return Err(err),
            },
        }
    }
    for (host, breaker) in layer.registry().items() {
        println!("{host}: {:?}", breaker.state());
    }
    Ok(())
}
