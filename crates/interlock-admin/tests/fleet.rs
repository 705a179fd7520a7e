//! The fleet-wide routes over real HTTP: against a real `redis-server`
//! (started by the test on a free port, killed at the end) with two
//! instances of a service, the same fenced protocol as the `interlock`
//! command line's `trip` and `close`; an async coordinator; and the routes
//! existing only for a coordinated registry with a token.
#![allow(
    clippy::unwrap_used,
    reason = "setup helpers: a failure fails the test"
)]

mod support;

#[path = "../../interlock-redis/tests/redis/support.rs"]
#[allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    reason = "shared with interlock-redis's tests"
)]
mod redis_support;

use std::time::Duration;

use axum::Router;
use hyper::StatusCode;
use interlock::mode::Blocking;
use interlock::storage::{Coordinator, MemoryStorage};
use interlock::{Registry, State};
use interlock_admin::Admin;
use interlock_redis::RedisStorage;

use redis_support::Server;
use support::{Http, serve};

const TOKEN: &str = "s3cret-token-0123456789abcdef";
const BEARER: &str = "Bearer s3cret-token-0123456789abcdef";

fn instance(server: &Server, poll: Duration) -> (Coordinator<Blocking>, Registry<Blocking>) {
    let storage = RedisStorage::from_client(server.client(), Duration::from_millis(500))
        .poll_interval(poll)
        .notifications(false)
        .build()
        .unwrap();
    let coordinator = Coordinator::blocking(storage);
    let registry = Registry::builder()
        .coordinator(&coordinator)
        .build()
        .unwrap();
    (coordinator, registry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_trip_and_close_are_fenced_like_the_cli_on_redis() {
    let mut server = Server::start();
    let (_lane, here) = instance(&server, Duration::from_secs(60));
    let (there_lane, there) = instance(&server, Duration::from_millis(50));
    let payments = here.get("payments");
    let elsewhere = there.get("payments");
    let admin = Admin::builder(here.clone())
        .bearer_token(TOKEN)
        .build()
        .unwrap();
    assert!(admin.has_fleet_controls());
    let http = Http::new(serve(admin.mount(Router::new(), "/interlock").unwrap()).await);
    let trip = |version: &str| format!("/interlock/breakers/payments/fleet/trip{version}");
    let close = |version: &str| format!("/interlock/breakers/payments/fleet/close{version}");

    // The JSON shows the shared view beside the local state.
    let list = support::poll(support::DEADLINE, "this instance's first read", || async {
        let list = http.get("/interlock/breakers").await.json();
        (!list["breakers"][0]["shared"].is_null()).then_some(list)
    })
    .await;
    assert_eq!(list["coordinated"], true);
    assert_eq!(list["fleet_controls"], true);
    let shared = &list["breakers"][0]["shared"];
    assert_eq!(shared["state"], "closed");
    assert_eq!(shared["version"], 0);
    for field in [
        "opened_at",
        "probes_permitted",
        "probes_remaining",
        "probes_completed",
        "probe_failures",
        "probe_slows",
    ] {
        assert!(shared[field].is_u64(), "{field}: {shared}");
    }

    // No or a wrong token: 401, nothing written.
    for authorization in [None, Some("Bearer wrong")] {
        let reply = http.post(&trip("?version=0"), authorization).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    }
    // Without the version shown: 400. An unknown name: 404, not created.
    let reply = http.post(&trip(""), Some(BEARER)).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    assert!(reply.json()["error"].as_str().unwrap().contains("version"));
    let reply = http
        .post(
            "/interlock/breakers/nope/fleet/trip?version=0",
            Some(BEARER),
        )
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(here.names(), ["payments"]);
    assert_eq!(
        there_lane.read_shared("payments").unwrap().version,
        0,
        "nothing written"
    );

    // The trip at the version shown: applied, adopted here at once, and
    // by the other instance at its next poll.
    let reply = http.post(&trip("?version=0"), Some(BEARER)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let body = reply.json();
    assert_eq!(body["applied"], true);
    assert_eq!(body["shared"]["state"], "open");
    assert_eq!(body["shared"]["version"], 1);
    assert!(
        body["shared"]["opened_at"].as_u64().unwrap() > 1_600_000_000_000,
        "Redis time: {body}"
    );
    assert_eq!(body["breaker"]["state"], "open");
    assert_eq!(payments.state(), State::Open);
    assert!(redis_support::eventually(
        Duration::from_secs(5),
        || elsewhere.state() == State::Open
    ));

    // Already OPEN: nothing written.
    let reply = http.post(&trip("?version=1"), Some(BEARER)).await;
    assert_eq!(reply.status, StatusCode::OK);
    let body = reply.json();
    assert_eq!(body["applied"], false);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("already OPEN v1"),
        "{body}"
    );
    // A close at a version no longer current: 409, nothing written.
    let reply = http.post(&close("?version=0"), Some(BEARER)).await;
    assert_eq!(reply.status, StatusCode::CONFLICT);
    let body = reply.json();
    assert_eq!(body["applied"], false);
    assert_eq!(body["shared"]["version"], 1);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("OPEN v1, not v0"),
        "{body}"
    );
    assert_eq!(there_lane.read_shared("payments").unwrap().version, 1);

    // The close at the version shown.
    let reply = http.post(&close("?version=1"), Some(BEARER)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json()["shared"]["version"], 2);
    assert_eq!(payments.state(), State::Closed);
    assert!(redis_support::eventually(
        Duration::from_secs(5),
        || elsewhere.state() == State::Closed
    ));

    // Every dashboard hears of a fleet-wide action.
    let mut events = http.events("/interlock/events").await;
    assert_eq!(events.next().await.event, "init");
    let reply = http.post(&trip("?version=2"), Some(BEARER)).await;
    assert_eq!(reply.status, StatusCode::OK);
    let action = events
        .until("the fleet-wide action", |m| {
            m.event == "event" && m.data["kind"] == "operator"
        })
        .await;
    assert_eq!(action.data["action"], "fleet_trip");
    assert_eq!(
        (&action.data["from"], &action.data["to"]),
        (&"closed".into(), &"open".into())
    );
    assert!(
        action.data["detail"]
            .as_str()
            .unwrap()
            .contains("CLOSED v2 → OPEN v3")
    );

    // The storage down: 503, and the breaker is not degraded for it.
    server.kill();
    let reply = http.post(&close("?version=3"), Some(BEARER)).await;
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.text()
    );
    assert!(
        reply.json()["error"]
            .as_str()
            .unwrap()
            .contains("did not answer")
    );
    here.close_all();
    there.close_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_coordinator_serves_fleet_writes() {
    let storage = MemoryStorage::new();
    let lane = Coordinator::manual_async(storage.clone());
    let registry = Registry::builder().coordinator(&lane).build().unwrap();
    let breaker = registry.get("search");
    lane.run_writes().await;
    let admin = Admin::builder(registry)
        .bearer_token(TOKEN)
        .build()
        .unwrap();
    let http = Http::new(serve(admin.mount(Router::new(), "/interlock").unwrap()).await);
    let reply = http
        .post(
            "/interlock/breakers/search/fleet/trip?version=0",
            Some(BEARER),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(storage.peek("search").unwrap().state, State::Open);
    assert_eq!(breaker.state(), State::Open);
    let reply = http
        .post(
            "/interlock/breakers/search/fleet/close?version=1",
            Some(BEARER),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(storage.peek("search").unwrap().version, 2);
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_routes_exist_only_for_a_coordinated_registry_with_a_token() {
    let local = Registry::new();
    let _ = local.get("payments");
    let coordinated = Registry::builder()
        .coordinator(&Coordinator::manual(MemoryStorage::new()))
        .build()
        .unwrap();
    let _ = coordinated.get("payments");
    let local_admin = Admin::builder(local).bearer_token(TOKEN).build().unwrap();
    let read_only = Admin::builder(coordinated).build().unwrap();
    assert!(!local_admin.has_fleet_controls());
    assert!(!read_only.has_fleet_controls());
    for admin in [local_admin, read_only] {
        let http = Http::new(serve(admin.mount(Router::new(), "/interlock").unwrap()).await);
        let reply = http
            .post(
                "/interlock/breakers/payments/fleet/trip?version=0",
                Some(BEARER),
            )
            .await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND);
    }
}
