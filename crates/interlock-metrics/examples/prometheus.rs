//! An axum service that guards a flaky dependency with a circuit breaker and
//! serves the breaker's metrics to Prometheus at `/metrics`.
//!
//! The dependency fails on requests 3 to 6, so the breaker (4-call window,
//! trips at 50%) opens on the fourth request and rejects the next ones for
//! 10 seconds, then probes its way back to closed.
//!
//!     cargo run -p interlock-metrics --example prometheus
//!     curl localhost:3000/work      # a few times
//!     curl localhost:3000/metrics   # interlock_state{breaker="inventory",state="open"} 1, ...
//!
//! With `--once` it serves on a free loopback port, sends itself six
//! requests and one scrape, prints the scrape's counter and gauge lines and
//! exits (the crate's tests run it that way).
#![allow(clippy::print_stdout)]

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State as Shared;
use axum::http::StatusCode;
use axum::routing::get;
use interlock::{CallError, CircuitBreaker, Config, SlidingWindow};
use interlock_metrics::{DURATION_BUCKETS, MetricsEventListener, names};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct App {
    breaker: CircuitBreaker,
    requests: AtomicU64,
    prometheus: PrometheusHandle,
}

#[derive(Debug)]
struct Unavailable;

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("inventory service unavailable")
    }
}

impl Error for Unavailable {}

/// The flaky dependency: requests 3 to 6 (counting from 1) fail.
fn check_inventory(request: u64) -> Result<&'static str, Unavailable> {
    if (3..=6).contains(&request) {
        Err(Unavailable)
    } else {
        Ok("in stock")
    }
}

async fn work(Shared(app): Shared<Arc<App>>) -> (StatusCode, String) {
    let request = app.requests.fetch_add(1, Ordering::Relaxed) + 1;
    match app.breaker.call(|| check_inventory(request)) {
        Ok(answer) => (StatusCode::OK, answer.to_owned()),
        Err(CallError::Inner(error)) => (StatusCode::BAD_GATEWAY, error.to_string()),
        Err(rejected) => (StatusCode::SERVICE_UNAVAILABLE, rejected.to_string()),
    }
}

async fn scrape(Shared(app): Shared<Arc<App>>) -> String {
    app.prometheus.render()
}

/// A bare HTTP/1.1 GET, enough for the self-check.
async fn get_body(addr: std::net::SocketAddr, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    Ok(response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let once = std::env::args().any(|arg| arg == "--once");

    // The recorder first: the listener registers its handles with the
    // recorder installed when a breaker reports its first event.
    let prometheus = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(names::CALL_DURATION.to_owned()),
            &DURATION_BUCKETS,
        )?
        .install_recorder()?;

    let breaker = CircuitBreaker::builder("inventory")
        .config(
            Config::builder()
                .sliding_window(SlidingWindow::count(4))
                .minimum_number_of_calls(4)
                .wait_duration_in_open(Duration::from_secs(10))
                .permitted_calls_in_half_open(2)
                .build()?,
        )
        .listener(MetricsEventListener::new())
        .build()?;
    let app = Arc::new(App {
        breaker,
        requests: AtomicU64::new(0),
        prometheus,
    });
    let router = Router::new()
        .route("/work", get(work))
        .route("/metrics", get(scrape))
        .with_state(app);

    if !once {
        let listener = TcpListener::bind("127.0.0.1:3000").await?;
        println!(
            "serving on http://{}/work and /metrics",
            listener.local_addr()?
        );
        axum::serve(listener, router).await?;
        return Ok(());
    }

    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    for _ in 0..6 {
        get_body(addr, "/work").await?;
    }
    let scrape = get_body(addr, "/metrics").await?;
    // Durations vary from run to run; counts, counters and gauges do not.
    let mut lines: Vec<&str> = scrape
        .lines()
        .filter(|line| line.starts_with("interlock_"))
        .filter(|line| !line.contains("_bucket") && !line.contains("_sum"))
        .collect();
    lines.sort_unstable();
    for line in lines {
        println!("{line}");
    }
    Ok(())
}
