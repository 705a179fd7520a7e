//! The live stream and the truthful content over real HTTP on loopback:
//! the first message at 1,000 breakers, deltas carrying only what changed
//! (and nothing when nothing did), "state since" and the creation time on
//! the feed's clock, a timeline that starts at creation, breakers the
//! registry no longer lists leaving the stream, and the page's URL with
//! and without a trailing slash.
#![allow(
    clippy::unwrap_used,
    reason = "setup helpers: a failure fails the test"
)]

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use axum::Router;
use hyper::StatusCode;
use interlock::{CircuitBreaker, Config, ManualClock, Registry, SlidingWindow, State};
use interlock_admin::{Admin, BuildError, EventFeed};
use serde_json::Value;

use support::{Events, Http, serve, trip};

/// The admin of `registry` (sampled by hand: the sampler's interval is a
/// minute, and its first tick is over before a test subscribes), nested
/// at `/interlock`.
async fn served(registry: Registry, feed: EventFeed) -> (Http, Admin) {
    let admin = Admin::builder(registry)
        .feed(feed)
        .sample_interval(Duration::from_secs(60))
        .build()
        .unwrap();
    let http = Http::new(serve(admin.mount(Router::new(), "/interlock").unwrap()).await);
    (http, admin)
}

fn names_of(rows: &Value) -> BTreeSet<String> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].as_str().unwrap().to_owned())
        .collect()
}

/// The next message that is not a state change (calls here trip nothing,
/// but a test must not depend on it).
async fn next_delta(events: &mut Events) -> support::Message {
    events.until("the next delta", |m| m.event == "delta").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_breakers_fit_a_small_first_message_then_only_changes_travel() {
    let feed = EventFeed::new();
    let registry = support::registry(&feed);
    let hosts: Vec<String> = (0..1_000)
        .map(|i| format!("api-{i:04}.pool-{}.svc.internal", i % 10))
        .collect();
    for host in &hosts {
        let _ = registry.get(host).call(|| Ok::<_, std::io::Error>(()));
    }
    let (http, admin) = served(registry.clone(), feed).await;

    let mut events = http.events("/interlock/events").await;
    let init = events.next().await;
    assert_eq!(init.event, "init");
    assert_eq!(init.data["breakers"].as_array().unwrap().len(), 1_000);
    assert!(
        init.bytes <= 250 * 1024,
        "the first message is {} bytes",
        init.bytes
    );
    eprintln!("stream test: init of 1,000 breakers: {} bytes", init.bytes);

    // 5 % of the breakers change: the next sample sends exactly those.
    let changed: BTreeSet<String> = hosts.iter().step_by(20).cloned().collect();
    for host in &changed {
        let _ = registry.get(host).call(|| Ok::<_, std::io::Error>(()));
    }
    admin.sample_now();
    let delta = next_delta(&mut events).await;
    assert_eq!(names_of(&delta.data["changed"]), changed);
    assert!(delta.bytes < 10 * 1024, "{} bytes", delta.bytes);
    for row in delta.data["changed"].as_array().unwrap() {
        assert_eq!(row[4], 2, "two calls now: {row}");
    }

    // Nothing changed: nothing is sent (the next message is the delta of
    // the one change after it).
    admin.sample_now();
    let _ = registry.get(&hosts[7]).call(|| Ok::<_, std::io::Error>(()));
    admin.sample_now();
    let delta = next_delta(&mut events).await;
    assert_eq!(
        names_of(&delta.data["changed"]),
        BTreeSet::from([hosts[7].clone()])
    );

    // A new breaker arrives as a changed row.
    let _ = registry.get("late-comer");
    admin.sample_now();
    let delta = next_delta(&mut events).await;
    assert_eq!(
        names_of(&delta.data["changed"]),
        BTreeSet::from(["late-comer".to_owned()])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_since_and_creation_are_on_the_feeds_clock_and_the_timeline_starts_at_creation() {
    let clock = ManualClock::new();
    let feed = EventFeed::builder().clock(clock.clone()).build().unwrap();
    let registry = Registry::builder()
        .config(
            Config::builder()
                .minimum_number_of_calls(4)
                .sliding_window(SlidingWindow::count(4))
                .wait_duration_in_open(Duration::from_secs(60))
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .listener(feed.clone())
        .build()
        .unwrap();
    let (http, admin) = served(registry.clone(), feed).await;
    clock.advance(Duration::from_secs(10));
    let _ = registry.get("payments");
    clock.advance(Duration::from_secs(5));
    admin.sample_now();
    clock.advance(Duration::from_secs(10));
    trip(&registry, "payments");
    clock.advance(Duration::from_secs(5));
    admin.sample_now();

    let view = http.get("/interlock/breakers/payments").await.json();
    assert_eq!(view["state"], "open");
    assert_eq!(view["created_at"], 10_000);
    assert_eq!(view["state_since"], 25_000);
    let list = http.get("/interlock/breakers").await.json();
    assert_eq!(list["now"], 30_000);
    assert_eq!(list["breakers"][0]["state_since"], 25_000);

    // The stream's row says the same, and so does the history.
    let mut events = http.events("/interlock/events").await;
    let init = events.next().await;
    let columns: Vec<&str> = init.data["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let cell = |name: &str| {
        let i = columns.iter().position(|c| *c == name).unwrap();
        init.data["breakers"][0][i].clone()
    };
    assert_eq!(cell("state_since"), 25_000);
    assert_eq!(cell("created_at"), 10_000);
    assert_eq!(cell("retry_at"), 85_000, "60 s after the trip");
    let history = http
        .get("/interlock/breakers/payments/history")
        .await
        .json();
    assert_eq!(history["name"], "payments");
    assert_eq!(history["created_at"], 10_000);
    let samples = history["samples"].as_array().unwrap();
    assert!(
        samples.iter().all(|s| s["t"].as_u64().unwrap() >= 10_000),
        "nothing before creation: {history}"
    );
    assert_eq!(samples.last().unwrap()["state"], "open");

    // Unknown names: 404, and nothing is created.
    for path in [
        "/interlock/breakers/nope/history",
        "/interlock/breakers/%FF/history",
    ] {
        let reply = http.get(path).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}");
    }
    assert_eq!(registry.names(), ["payments"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_the_registry_does_not_list_leaves_the_stream() {
    // Until the registry can forget a breaker, the feed's side of eviction
    // is shown with a breaker that reports to the feed without being in
    // the registry: the same as one the registry removed.
    let feed = EventFeed::new();
    let registry = support::registry(&feed);
    let _ = registry.get("payments");
    let (http, admin) = served(registry.clone(), feed.clone()).await;
    let mut events = http.events("/interlock/events").await;
    let init = events.next().await;
    assert_eq!(
        names_of(&init.data["breakers"]),
        BTreeSet::from(["payments".to_owned()])
    );

    let stray = CircuitBreaker::builder("evicted-host")
        .listener(feed.clone())
        .build()
        .unwrap();
    stray.force_open();
    assert_eq!(feed.last_state("evicted-host"), Some(State::ForcedOpen));
    admin.sample_now();
    let removed = events
        .until("the removal", |m| {
            m.event == "event" && m.data["kind"] == "removed"
        })
        .await;
    assert_eq!(removed.data["breaker"], "evicted-host");
    assert_eq!(feed.last_state("evicted-host"), None, "forgotten");
    // Once: the next sample says nothing more about it.
    admin.sample_now();
    let _ = registry
        .get("payments")
        .call(|| Ok::<_, std::io::Error>(()));
    admin.sample_now();
    let next = events
        .until("the next message", |m| {
            m.event != "event" || m.data["kind"] == "removed"
        })
        .await;
    assert_eq!(next.event, "delta", "{:?}", next.data);
    // A later dashboard never hears of it; the activity log keeps it.
    let mut late = http.events("/interlock/events").await;
    let init = late.next().await;
    assert_eq!(
        names_of(&init.data["breakers"]),
        BTreeSet::from(["payments".to_owned()])
    );
    assert!(
        init.data["activity"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "removed" && e["breaker"] == "evicted-host")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_answers_with_and_without_a_trailing_slash() {
    let feed = EventFeed::new();
    let registry = support::registry(&feed);
    let _ = registry.get("payments");
    let (http, _admin) = served(registry, feed).await;
    for path in ["/interlock", "/interlock/"] {
        let page = http.get(path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert!(page.text().contains("?asset=app.js"), "{path}");
        assert!(page.header("content-security-policy").is_some(), "{path}");
        for asset in ["app.js", "card.js", "style.css"] {
            let reply = http.get(&format!("{path}?asset={asset}")).await;
            assert_eq!(reply.status, StatusCode::OK, "{path}?asset={asset}");
        }
    }
    // The API is the same under either page URL (the page resolves it
    // next to itself).
    assert_eq!(
        http.get("/interlock/breakers").await.json()["breakers"][0]["name"],
        "payments"
    );
    assert_eq!(
        http.get("/interlock/nope").await.status,
        StatusCode::NOT_FOUND
    );
}

#[test]
fn mount_rejects_paths_axum_cannot_nest() {
    let admin = Admin::builder(Registry::new()).build().unwrap();
    for bad in [
        "",
        "interlock",
        "/interlock/",
        "//interlock",
        "/a//b",
        "/{name}",
        "/ops/*rest",
        "/with space",
        "/caf\u{e9}",
    ] {
        let err = admin.mount(Router::<()>::new(), bad).unwrap_err();
        assert!(
            matches!(&err, BuildError::InvalidMountPath { path, .. } if path == bad),
            "{bad:?}: {err}"
        );
        assert!(err.to_string().contains("invalid mount path"), "{err}");
    }
    for good in ["/", "/interlock", "/ops/interlock", "/a-b_c.d~e"] {
        assert!(admin.mount(Router::<()>::new(), good).is_ok(), "{good:?}");
    }
}
