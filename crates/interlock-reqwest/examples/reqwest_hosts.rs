//! Two upstreams behind one `reqwest` client: the failing one trips its own
//! breaker and is answered locally; the healthy one is untouched.
//!
//!     cargo run -p interlock-reqwest --example reqwest_hosts
#![allow(clippy::print_stdout)]

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use interlock::{Config, SlidingWindow};
use interlock_reqwest::{CircuitBreakerMiddleware, rejection};

/// Serves `status` on a fresh loopback port; returns the base URL.
async fn upstream(status: StatusCode) -> Result<String, std::io::Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = Router::new().route("/", get(move || async move { status }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(url)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let (down, up) = (
        upstream(StatusCode::SERVICE_UNAVAILABLE).await?,
        upstream(StatusCode::OK).await?,
    );
    let breakers = CircuitBreakerMiddleware::builder()
        .config(
            Config::builder()
                .minimum_number_of_calls(2)
                .sliding_window(SlidingWindow::count(2))
                .build()?,
        )
        .build()?;
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(breakers.clone())
        .build();

    for url in [&down, &down, &down, &up] {
        match client.get(url.as_str()).send().await {
            Ok(response) => println!("{url}: {}", response.status()),
            Err(err) => match rejection(&err) {
                Some(open) => println!("{url}: rejected locally ({open})"),
                None => return Err(err.into()),
            },
        }
    }
    for (host, breaker) in breakers.registry().items() {
        println!("{host}: {:?}", breaker.state());
    }
    Ok(())
}
