//! Every operator action, and every refused attempt, is logged through
//! `tracing` (target `interlock_admin`), without the token.
#![allow(clippy::unwrap_used, reason = "test helpers: a failure fails the test")]

use std::io;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use interlock::Registry;
use interlock_admin::Admin;
use tower::ServiceExt;

const TOKEN: &str = "s3cret-token-0123456789abcdef";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

async fn post(app: &Router, path: &str, token: Option<&str>) -> StatusCode {
    let mut request = Request::post(path);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    app.clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap()
        .status()
}

// One thread, so the subscriber set for this test sees the handlers' records.
#[tokio::test(flavor = "current_thread")]
async fn operator_actions_and_refusals_are_logged_without_the_token() {
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let registry = Registry::new();
    let _ = registry.get("payments");
    let admin = Admin::builder(registry)
        .bearer_token(TOKEN)
        .build()
        .unwrap();
    let app: Router = Router::new().nest("/interlock", admin.router());

    let force_open = "/interlock/breakers/payments/force-open";
    assert_eq!(post(&app, force_open, Some(TOKEN)).await, StatusCode::OK);
    assert_eq!(
        post(&app, "/interlock/breakers/payments/reset", Some("guess")).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        post(&app, "/interlock/breakers/%3Cx%3E%0A/disable", Some(TOKEN)).await,
        StatusCode::NOT_FOUND
    );

    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 3, "{log}");
    assert!(
        lines[0].contains("INFO") && lines[0].contains("interlock_admin"),
        "{log}"
    );
    assert!(lines[0].contains("operator action"), "{log}");
    assert!(lines[0].contains("action=\"force_open\""), "{log}");
    assert!(lines[0].contains("breaker=\"payments\""), "{log}");
    assert!(
        lines[0].contains("from=\"closed\"") && lines[0].contains("to=\"forced_open\""),
        "{log}"
    );
    assert!(
        lines[1].contains("WARN") && lines[1].contains("refused"),
        "{log}"
    );
    assert!(lines[1].contains("action=\"reset\""), "{log}");
    assert!(
        lines[2].contains("WARN") && lines[2].contains("unknown breaker"),
        "{log}"
    );
    // A hostile name cannot forge a log line: its newline is escaped.
    assert!(lines[2].contains(r#"breaker="<x>\n""#), "{log}");
    assert!(
        !log.contains(TOKEN) && !log.contains("guess"),
        "no token is logged"
    );
}
