//! Two upstreams behind one blocking `ureq` agent: the failing one trips its
//! own breaker and is answered locally; the healthy one is untouched.
//!
//!     cargo run -p interlock-ureq --example ureq_hosts
#![allow(clippy::print_stdout)]

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use interlock::{Config, SlidingWindow};
use interlock_ureq::{CircuitBreakerMiddleware, rejection};

/// Serves `status` on a fresh loopback port, on a thread of its own;
/// returns the base URL.
fn upstream(status: StatusCode) -> Result<String, std::io::Error> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let url = format!("http://{}", listener.local_addr()?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        runtime.block_on(async move {
            let app = Router::new().route("/", get(move || async move { status }));
            let listener = tokio::net::TcpListener::from_std(listener)?;
            axum::serve(listener, app).await
        })
    });
    Ok(url)
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let (down, up) = (
        upstream(StatusCode::SERVICE_UNAVAILABLE)?,
        upstream(StatusCode::OK)?,
    );
    let breakers = CircuitBreakerMiddleware::builder()
        .config(
            Config::builder()
                .minimum_number_of_calls(2)
                .sliding_window(SlidingWindow::count(2))
                .build()?,
        )
        .build()?;
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .middleware(breakers.clone())
        .build()
        .new_agent();

    for url in [&down, &down, &down, &up] {
        match agent.get(url.as_str()).call() {
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
