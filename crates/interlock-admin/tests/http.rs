//! The admin router over real HTTP on loopback: JSON, security, the event
//! stream and the page's assets.
#![allow(
    clippy::unwrap_used,
    reason = "setup helpers: a failure fails the test"
)]

mod support;

use std::time::Duration;

use axum::Router;
use hyper::StatusCode;
use interlock::storage::{Coordinator, MemoryStorage};
use interlock::{Registry, State};
use interlock_admin::{Admin, BuildError, EventFeed};
use serde_json::Value;

use support::{Http, registry, serve, trip};

const TOKEN: &str = "s3cret-token-0123456789abcdef";
const BEARER: &str = "Bearer s3cret-token-0123456789abcdef";

/// Names no one should paste into HTML or JSON by hand.
const HOSTILE: [&str; 4] = [
    "<script>alert(1)</script>",
    "a\"b' \\ <img src=x onerror=alert(1)>\n\u{7}",
    "team/payments?x=1#y",
    "\u{1f525} caf\u{e9} </textarea>",
];

const ACTIONS: [(&str, State); 4] = [
    ("force-open", State::ForcedOpen),
    ("disable", State::Disabled),
    ("metrics-only", State::MetricsOnly),
    ("reset", State::Closed),
];

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(name: &str) -> String {
    name.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

struct App {
    http: Http,
    registry: Registry,
    admin: Admin,
}

/// The admin of a fresh registry, nested at `/interlock` and served on
/// loopback; with operator controls if `token` is given.
async fn app(token: Option<&str>) -> App {
    let feed = EventFeed::new();
    let registry = registry(&feed);
    let mut builder = Admin::builder(registry.clone())
        .feed(feed)
        .sample_interval(Duration::from_millis(50));
    if let Some(token) = token {
        builder = builder.bearer_token(token);
    }
    let admin = builder.build().unwrap();
    let addr = serve(Router::new().nest("/interlock", admin.router())).await;
    App {
        http: Http::new(addr),
        registry,
        admin,
    }
}

fn find<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("{name:?} is not in {list}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breakers_json_reports_state_rates_config_and_last_failure() {
    let app = app(None).await;
    let payments = app.registry.get("payments");
    let _ = payments.call(|| Ok::<_, std::io::Error>(()));
    let _ = payments.call(|| Err::<(), _>(std::io::Error::other("connection refused")));
    let _ = app.registry.get("search");
    trip(&app.registry, "inventory");

    let reply = app.http.get("/interlock/breakers").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let list = reply.json();
    assert_eq!(list["controls"], false);
    let names: Vec<_> = list["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["payments", "search", "inventory"]);

    let p = find(&list, "payments");
    assert_eq!(p["state"], "closed");
    assert_eq!(p["snapshot"]["total_calls"], 2);
    assert_eq!(p["snapshot"]["failed_calls"], 1);
    assert_eq!(p["snapshot"]["slow_calls"], 0);
    assert_eq!(p["failure_rate"], 0.5);
    assert_eq!(p["slow_call_rate"], 0.0);
    assert_eq!(p["retry_after_secs"], Value::Null);
    assert_eq!(p["last_failure"]["message"], "connection refused");
    assert_eq!(p["last_failure"]["type_name"], "std::io::error::Error");
    assert_eq!(p["is_coordinated"], false);
    assert_eq!(p["is_degraded"], false);
    assert_eq!(p["shared"], Value::Null);
    let now = list["now"].as_u64().unwrap();
    let since = p["state_since"].as_u64().unwrap();
    let created = p["created_at"].as_u64().unwrap();
    assert!(created <= since && since <= now, "{created} {since} {now}");
    let config = &p["config"];
    assert_eq!(config["failure_rate_threshold"], 0.5);
    assert_eq!(config["minimum_number_of_calls"], 4);
    assert_eq!(config["sliding_window"]["kind"], "count");
    assert_eq!(config["sliding_window"]["size"], 4);
    assert_eq!(config["wait_duration_in_open_secs"], 60.0);
    // Ruling D7: unless set, a stalled round is abandoned after the open wait.
    assert_eq!(config["max_wait_in_half_open_secs"], 60.0);
    assert_eq!(config["permitted_calls_in_half_open"], 10);
    assert_eq!(config["trip_policy"]["kind"], "failure_rate");
    assert_eq!(config["half_open_policy"]["kind"], "probe_round");

    let s = find(&list, "search");
    assert_eq!(s["state"], "closed");
    assert_eq!(s["last_failure"], Value::Null);

    let i = find(&list, "inventory");
    assert_eq!(i["state"], "open");
    let retry = i["retry_after_secs"].as_f64().unwrap();
    assert!(retry > 0.0 && retry <= 60.0, "{retry}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_breaker_by_name_and_unknown_names_are_404() {
    let app = app(Some(TOKEN)).await;
    trip(&app.registry, "payments");

    let reply = app.http.get("/interlock/breakers/payments").await;
    assert_eq!(reply.status, StatusCode::OK);
    let view = reply.json();
    assert_eq!(view["name"], "payments");
    assert_eq!(view["state"], "open");

    for path in [
        "/interlock/breakers/nope",
        "/interlock/breakers/%FF%FE",
        "/interlock/breakers/pay%2",
    ] {
        let reply = app.http.get(path).await;
        assert!(
            reply.status == StatusCode::NOT_FOUND || reply.status == StatusCode::BAD_REQUEST,
            "{path}: {}",
            reply.status
        );
    }
    assert_eq!(
        app.registry.names(),
        ["payments"],
        "a lookup creates nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_write_routes_do_not_exist() {
    let app = app(None).await;
    trip(&app.registry, "payments");
    assert!(!app.admin.has_controls());
    for (action, _) in ACTIONS {
        for authorization in [None, Some(BEARER), Some("Bearer ")] {
            let reply = app
                .http
                .post(
                    &format!("/interlock/breakers/payments/{action}"),
                    authorization,
                )
                .await;
            assert_eq!(
                reply.status,
                StatusCode::NOT_FOUND,
                "{action} {authorization:?}"
            );
        }
    }
    assert_eq!(app.registry.get("payments").state(), State::Open);
    assert_eq!(
        app.http.get("/interlock/breakers").await.json()["controls"],
        false
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_without_or_with_a_wrong_token_get_401_and_change_nothing() {
    let app = app(Some(TOKEN)).await;
    trip(&app.registry, "payments");
    let _ = app.registry.get("search");
    let before = app.registry.get("payments").generation();
    let wrong = [
        None,
        Some(""),
        Some("Bearer"),
        Some("Bearer "),
        Some("Bearer wrong"),
        Some("Bearer s3cret-token-0123456789abcde"),
        Some("Bearer s3cret-token-0123456789abcdef0"),
        Some("Bearer S3CRET-TOKEN-0123456789ABCDEF"),
        Some("Basic s3cret-token-0123456789abcdef"),
        Some("s3cret-token-0123456789abcdef"),
    ];
    for (action, _) in ACTIONS {
        for authorization in wrong {
            for name in ["payments", "search", "unknown"] {
                let reply = app
                    .http
                    .post(
                        &format!("/interlock/breakers/{name}/{action}"),
                        authorization,
                    )
                    .await;
                assert_eq!(
                    reply.status,
                    StatusCode::UNAUTHORIZED,
                    "{action} {name} {authorization:?}"
                );
                assert_eq!(
                    reply.header("www-authenticate"),
                    Some("Bearer realm=\"interlock\"")
                );
                assert_eq!(reply.json()["error"], "missing or wrong bearer token");
            }
        }
    }
    let payments = app.registry.get("payments");
    assert_eq!(payments.state(), State::Open);
    assert_eq!(payments.generation(), before, "nothing changed");
    assert_eq!(app.registry.get("search").state(), State::Closed);
    assert_eq!(
        app.registry.names(),
        ["payments", "search"],
        "nothing was created"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_operator_action_applies_with_the_token() {
    let app = app(Some(TOKEN)).await;
    trip(&app.registry, "payments");
    let payments = app.registry.get("payments");
    for (action, state) in ACTIONS {
        let reply = app
            .http
            .post(
                &format!("/interlock/breakers/payments/{action}"),
                Some(BEARER),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{action}: {}", reply.text());
        assert_eq!(payments.state(), state, "{action}");
        assert_eq!(reply.json()["state"], state.as_str(), "{action}");
    }
    // The scheme is case-insensitive (RFC 7235).
    let reply = app
        .http
        .post(
            "/interlock/breakers/payments/force-open",
            Some(&BEARER.replace("Bearer", "bearer")),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(payments.state(), State::ForcedOpen);
    // A GET is not an action.
    let reply = app.http.get("/interlock/breakers/payments/reset").await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(payments.state(), State::ForcedOpen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_names_on_write_routes_are_404_and_create_nothing() {
    let app = app(Some(TOKEN)).await;
    let _ = app.registry.get("payments");
    for (action, _) in ACTIONS {
        for name in ["nope", "payments%20", "%3Cscript%3E", "%FF"] {
            let reply = app
                .http
                .post(
                    &format!("/interlock/breakers/{name}/{action}"),
                    Some(BEARER),
                )
                .await;
            assert_eq!(reply.status, StatusCode::NOT_FOUND, "{action} {name}");
        }
        let reply = app
            .http
            .post(&format!("/interlock/breakers//{action}"), Some(BEARER))
            .await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{action} with no name");
    }
    assert_eq!(app.registry.names(), ["payments"]);
    assert_eq!(app.registry.get("payments").state(), State::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_are_data_in_json_and_routable() {
    let app = app(Some(TOKEN)).await;
    for name in HOSTILE {
        trip(&app.registry, name);
    }
    let reply = app.http.get("/interlock/breakers").await;
    // Valid JSON whose strings are exactly the names.
    let list = reply.json();
    for name in HOSTILE {
        assert_eq!(find(&list, name)["state"], "open");
    }
    // Control characters are escaped, not sent raw.
    assert!(!reply.text().contains('\n') && !reply.text().contains('\u{7}'));

    for name in HOSTILE {
        let path = format!("/interlock/breakers/{}", encode(name));
        let reply = app.http.get(&path).await;
        assert_eq!(reply.status, StatusCode::OK, "{name:?}");
        assert_eq!(reply.json()["name"], name);
        let reply = app
            .http
            .post(&format!("{path}/force-open"), Some(BEARER))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{name:?}");
        assert_eq!(
            app.registry.get(name).state(),
            State::ForcedOpen,
            "{name:?}"
        );
    }

    // The page is static: no name is ever templated into it.
    let page = app.http.get("/interlock").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.text().contains("alert"));
    // Its scripts never write markup from data.
    for asset in ["app.js", "card.js"] {
        let script = app.http.get(&format!("/interlock?asset={asset}")).await;
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
        ] {
            assert!(!script.text().contains(sink), "{asset} uses {sink}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_stream_starts_with_init_and_delivers_a_state_change() {
    let app = app(Some(TOKEN)).await;
    let _ = app.registry.get("payments");
    let mut events = app.http.events("/interlock/events").await;

    let init = events.next().await;
    assert_eq!(init.event, "init");
    assert_eq!(init.data["controls"], true);
    assert_eq!(init.data["coordinated"], false);
    assert_eq!(init.data["fleet_controls"], false);
    assert_eq!(init.data["history_secs"], 300.0);
    let columns = init.data["columns"].as_array().unwrap();
    assert_eq!(columns[0], "name");
    assert_eq!(columns[1], "state");
    // Rows are arrays in the announced column order, without history.
    let row = &init.data["breakers"][0];
    assert_eq!(row.as_array().unwrap().len(), columns.len());
    assert_eq!(row[0], "payments");
    assert_eq!(row[1], "closed");

    trip(&app.registry, "payments");
    let change = events
        .until("payments closed -> open", |m| {
            m.event == "event"
                && m.data["breaker"] == "payments"
                && m.data["kind"] == "state_changed"
        })
        .await;
    assert_eq!(change.data["from"], "closed");
    assert_eq!(change.data["to"], "open");
    assert!(change.data["t"].as_u64().is_some());
    assert!(change.data["now"].as_u64().is_some());

    // A dashboard opened later gets the change in the breaker's history
    // and the activity log.
    let mut late = app.http.events("/interlock/events").await;
    let init = late.next().await;
    assert_eq!(init.data["breakers"][0][1], "open");
    assert_eq!(init.data["activity"].as_array().unwrap().len(), 1);
    let history = app
        .http
        .get("/interlock/breakers/payments/history")
        .await
        .json();
    assert!(
        history["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "state_changed" && e["to"] == "open"),
        "{history}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_sees_operator_actions() {
    let app = app(Some(TOKEN)).await;
    let _ = app.registry.get("payments");
    let mut first = app.http.events("/interlock/events").await;
    let mut second = app.http.events("/interlock/events").await;
    assert_eq!(first.next().await.event, "init");
    assert_eq!(second.next().await.event, "init");

    let reply = app
        .http
        .post("/interlock/breakers/payments/force-open", Some(BEARER))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    for events in [&mut first, &mut second] {
        let action = events
            .until("the operator action", |m| {
                m.event == "event" && m.data["kind"] == "operator"
            })
            .await;
        assert_eq!(action.data["breaker"], "payments");
        assert_eq!(action.data["action"], "force_open");
        assert_eq!(action.data["from"], "closed");
        assert_eq!(action.data["to"], "forced_open");
    }
    // A refused write announces nothing.
    let reply = app
        .http
        .post("/interlock/breakers/payments/reset", Some("Bearer wrong"))
        .await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    let reply = app
        .http
        .post("/interlock/breakers/payments/disable", Some(BEARER))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let next = first
        .until("the next operator action", |m| {
            m.event == "event" && m.data["kind"] == "operator"
        })
        .await;
    assert_eq!(
        next.data["action"], "disable",
        "the refused reset was not announced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltas_stream_failure_rates_for_the_timeline() {
    let app = app(None).await;
    let payments = app.registry.get("payments");
    let mut events = app.http.events("/interlock/events").await;
    assert_eq!(events.next().await.event, "init");
    let _ = payments.call(|| Ok::<_, std::io::Error>(()));
    let _ = payments.call(|| Ok::<_, std::io::Error>(()));
    let _ = payments.call(|| Err::<(), _>(std::io::Error::other("timeout")));
    let delta = events
        .until("a delta with payments' rate", |m| {
            m.event == "delta" && m.data["changed"][0][4] == 3
        })
        .await;
    let row = &delta.data["changed"][0];
    assert_eq!(row[0], "payments");
    assert_eq!(row[1], "closed");
    assert_eq!(row[2], 0.3333, "rounded to 0.01 %");
    // The timeline keeps it: a card opened later draws it.
    let history = app
        .http
        .get("/interlock/breakers/payments/history")
        .await
        .json();
    let samples = history["samples"].as_array().unwrap();
    assert!(!samples.is_empty());
    assert!(
        samples
            .iter()
            .all(|s| s["t"].as_u64().is_some() && s["state"] == "closed")
    );
    assert_eq!(samples.last().unwrap()["failure_rate"], 0.3333);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_assets_work_under_a_prefix_and_load_nothing_external() {
    let app = app(Some(TOKEN)).await;
    let page = app.http.get("/interlock").await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("default-src 'none'"),
        "{csp}"
    );
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    // Relative references only: the assets hang off the page's own URL.
    assert!(page.text().contains("src=\"?asset=app.js\""));
    assert!(page.text().contains("href=\"?asset=style.css\""));

    let script = app.http.get("/interlock?asset=app.js").await;
    assert_eq!(script.status, StatusCode::OK);
    assert_eq!(
        script.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    let card = app.http.get("/interlock?asset=card.js").await;
    assert_eq!(card.status, StatusCode::OK);
    let style = app.http.get("/interlock?asset=style.css").await;
    assert_eq!(style.status, StatusCode::OK);
    assert_eq!(
        style.header("content-type"),
        Some("text/css; charset=utf-8")
    );
    assert_eq!(
        app.http
            .get("/interlock?asset=../../etc/passwd")
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    for body in [page.text(), script.text(), card.text(), style.text()] {
        for external in ["http://", "https://", "//cdn", "@import"] {
            // The SVG namespace is an identifier, not a load.
            let loads = body.replace("http://www.w3.org/2000/svg", "");
            assert!(
                !loads.contains(external),
                "an external reference: {external}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mounted_at_the_root_with_merge() {
    let feed = EventFeed::new();
    let registry = registry(&feed);
    let _ = registry.get("payments");
    let admin = Admin::builder(registry).feed(feed).build().unwrap();
    let http = Http::new(serve(Router::new().merge(admin.router())).await);
    assert_eq!(http.get("/").await.status, StatusCode::OK);
    assert_eq!(http.get("/?asset=app.js").await.status, StatusCode::OK);
    assert_eq!(
        http.get("/breakers").await.json()["breakers"][0]["name"],
        "payments"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinated_registry_of_any_mode_is_served() {
    let coordinator = Coordinator::blocking(MemoryStorage::new());
    let feed = EventFeed::new();
    let registry = Registry::builder()
        .coordinator(&coordinator)
        .listener(feed.clone())
        .build()
        .unwrap();
    let _ = registry.get("payments");
    let admin = Admin::builder(registry.clone())
        .feed(feed)
        .bearer_token(TOKEN)
        .build()
        .unwrap();
    let http = Http::new(serve(Router::new().nest("/ops/interlock", admin.router())).await);
    let list = http.get("/ops/interlock/breakers").await.json();
    assert_eq!(find(&list, "payments")["is_coordinated"], true);
    assert_eq!(find(&list, "payments")["is_degraded"], false);
    let reply = http
        .post("/ops/interlock/breakers/payments/force-open", Some(BEARER))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(registry.get("payments").state(), State::ForcedOpen);
}

#[test]
fn build_rejects_settings_that_cannot_work() {
    let build = |token: &str| Admin::builder(Registry::new()).bearer_token(token).build();
    assert!(matches!(build(""), Err(BuildError::InvalidToken { .. })));
    assert!(matches!(
        build("has space"),
        Err(BuildError::InvalidToken { .. })
    ));
    assert!(matches!(
        build("caf\u{e9}"),
        Err(BuildError::InvalidToken { .. })
    ));
    assert!(build(TOKEN).is_ok());
    for interval in [
        Duration::ZERO,
        Duration::from_millis(9),
        Duration::from_secs(61),
    ] {
        let err = Admin::builder(Registry::new())
            .sample_interval(interval)
            .build()
            .unwrap_err();
        assert!(
            matches!(err, BuildError::InvalidSampleInterval { interval: got, .. } if got == interval),
            "{err}"
        );
    }
    // No runtime here: building and routing still work; the sampler waits
    // for the first request.
    let admin = Admin::builder(Registry::new()).build().unwrap();
    let _router: Router = admin.router();
}
