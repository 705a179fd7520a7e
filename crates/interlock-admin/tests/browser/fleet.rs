//! A registry coordinated through a real `redis-server` (started by the
//! test on a free port, killed at the end), with a second instance of the
//! service on the same server: the fleet columns beside the local state,
//! the fleet-wide trip and close from a card, fenced by the version shown
//! (a write behind the page's back makes the next one a conflict, and
//! nothing is written), the local and fleet buttons told apart.

use std::time::Duration;

use axum::Router;
use fantoccini::Locator;
use interlock::mode::Blocking;
use interlock::storage::Coordinator;
use interlock::{Config, Registry, SlidingWindow, State};
use interlock_admin::{Admin, EventFeed};
use interlock_redis::RedisStorage;
use serde_json::json;

use crate::redis_support::Server;
use crate::support::{poll, serve};
use crate::{Browser, SETUP, TOKEN};

const PAYMENTS: &str = "payments-gateway";

/// One instance of the service: its own storage connection, coordinator
/// and registry.
fn instance(
    server: &Server,
    poll_interval: Duration,
    feed: Option<&EventFeed>,
) -> (Coordinator<Blocking>, Registry<Blocking>) {
    let storage = RedisStorage::from_client(server.client(), Duration::from_secs(2))
        .poll_interval(poll_interval)
        .notifications(false)
        .build()
        .unwrap();
    let coordinator = Coordinator::blocking(storage);
    let mut builder = Registry::builder()
        .config(
            Config::builder()
                .minimum_number_of_calls(4)
                .sliding_window(SlidingWindow::count(4))
                .wait_duration_in_open(Duration::from_secs(600))
                .build()
                .unwrap(),
        )
        .coordinator(&coordinator);
    if let Some(feed) = feed {
        builder = builder.listener(feed.clone());
    }
    let registry = builder.build().unwrap();
    (coordinator, registry)
}

/// `[state, fleet state, fleet version]` of a row.
async fn row(browser: &Browser, name: &str) -> serde_json::Value {
    browser
        .js(
            "const tr = [...document.querySelectorAll('#rows tr')].find((r) => r.dataset.breaker === arguments[0]);
             if (!tr) return null;
             const cells = [...tr.children];
             const at = (key) => cells[[...document.querySelectorAll('#head th')].findIndex((th) => th.dataset.key === key)];
             return [tr.dataset.state, at('fleet_state').textContent, at('fleet_version').textContent];",
            vec![json!(name)],
        )
        .await
}

fn names() -> Vec<String> {
    let mut names = vec![PAYMENTS.to_owned()];
    names.extend((0..24).map(|i| format!("db-{i:02}.cluster.internal")));
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_view_and_fenced_fleet_actions_on_redis() {
    let server = Server::start();
    // This instance polls rarely (and has no change notices), so the page
    // keeps showing what it last read while the other instance writes.
    let feed = EventFeed::new();
    let (_here_lane, here) = instance(&server, Duration::from_secs(60), Some(&feed));
    let (there_lane, there) = instance(&server, Duration::from_millis(100), None);
    for name in names() {
        let _ = here.get(&name);
        let _ = there.get(&name);
    }
    let admin = Admin::builder(here.clone())
        .feed(feed)
        .bearer_token(TOKEN)
        .sample_interval(Duration::from_millis(250))
        .build()
        .unwrap();
    assert!(admin.has_fleet_controls());
    let addr = serve(admin.mount(Router::new(), "/ops/interlock").unwrap()).await;
    let browser = Browser::start(1500, 1000).await;
    browser
        .client
        .goto(&format!("http://{addr}/ops/interlock/"))
        .await
        .unwrap();

    // The fleet columns, beside the local state: CLOSED v0 everywhere once
    // this instance has read the storage.
    poll(SETUP, "CLOSED v0 in the fleet columns", || async {
        (row(&browser, PAYMENTS).await == json!(["closed", "CLOSED", "v0"])).then_some(())
    })
    .await;
    let heads = browser
        .js(
            "return [...document.querySelectorAll('#head th')].filter((th) => getComputedStyle(th).display !== 'none')
                 .map((th) => th.textContent);",
            vec![],
        )
        .await;
    for label in ["Fleet state", "Fleet version", "Opened at", "Probes left"] {
        assert!(heads.to_string().contains(label), "{heads}");
    }
    assert_eq!(
        browser
            .js(
                "return document.getElementById('fleet-note').hidden;",
                vec![]
            )
            .await,
        false
    );

    // The card: the shared state, and two groups of buttons, told apart.
    browser
        .js(
            "[...document.querySelectorAll('#rows tr')].find((r) => r.dataset.breaker === arguments[0])
                 .querySelector('button.open').click();",
            vec![json!(PAYMENTS)],
        )
        .await;
    let card = browser
        .until(
            "the card's fleet section",
            "const card = document.querySelector('#detail .card');
             if (!card) return null;
             const legends = [...card.querySelectorAll('fieldset legend')].map((l) => l.textContent);
             return {
                 fleet: card.querySelector('section.fleet').hidden,
                 version: card.querySelector('section.fleet dd .value:not(:empty)') && card.querySelectorAll('section.fleet dd .value')[1].textContent,
                 legends,
                 fleetButtons: [...card.querySelectorAll('button[data-scope=\"fleet\"]')].map((b) => b.getAttribute('aria-label')),
             };",
            vec![],
        )
        .await;
    assert_eq!(card["fleet"], false, "{card}");
    assert_eq!(card["version"], "v0", "{card}");
    assert!(
        card["legends"][0]
            .as_str()
            .unwrap()
            .contains("This instance only"),
        "{card}"
    );
    assert!(
        card["legends"][1].as_str().unwrap().contains("Whole fleet"),
        "{card}"
    );
    assert!(
        card["legends"][1].as_str().unwrap().contains("v0"),
        "{card}"
    );
    assert!(
        card["fleetButtons"][0]
            .as_str()
            .unwrap()
            .contains("on every instance"),
        "{card}"
    );

    let token = browser.client.find(Locator::Id("token")).await.unwrap();
    token.send_keys(TOKEN).await.unwrap();
    let trip = "#detail button[data-action=\"fleet-trip\"]";
    let close = "#detail button[data-action=\"fleet-close\"]";
    // Trip fleet-wide: asked first, then written at the version shown.
    browser.click(trip).await;
    let question = browser
        .until(
            "the confirmation",
            "const box = document.querySelector('#detail .confirm');
             return box && !box.hidden ? box.textContent : null;",
            vec![],
        )
        .await;
    assert!(
        question.as_str().unwrap().contains("at shared version v0"),
        "{question}"
    );
    assert_eq!(
        there_lane.read_shared(PAYMENTS).unwrap().version,
        0,
        "nothing written before the confirmation"
    );
    browser
        .click("#detail button[data-action=\"confirm-fleet-trip\"]")
        .await;
    let said = browser.notice("OPEN v1").await;
    assert!(said.contains("CLOSED v0 → OPEN v1"), "{said}");
    let shared = there_lane.read_shared(PAYMENTS).unwrap();
    assert_eq!((shared.state, shared.version), (State::Open, 1));
    assert_eq!(
        here.get(PAYMENTS).state(),
        State::Open,
        "adopted at once here"
    );
    poll(SETUP, "the other instance OPEN", || async {
        (there.get(PAYMENTS).state() == State::Open).then_some(())
    })
    .await;
    poll(SETUP, "OPEN v1 on the page", || async {
        (row(&browser, PAYMENTS).await == json!(["open", "OPEN", "v1"])).then_some(())
    })
    .await;

    // Behind the page's back, the other instance's operator closes it (v2).
    let closed = there_lane.close_shared(PAYMENTS, 1).unwrap();
    assert_eq!((closed.state, closed.version), (State::Closed, 2));
    // The page still shows v1; a close at v1 is fenced out.
    browser.click(close).await;
    browser
        .click("#detail button[data-action=\"confirm-fleet-close\"]")
        .await;
    let said = browser.notice("changed since you looked").await;
    assert!(said.contains("CLOSED v2, not v1"), "{said}");
    assert_eq!(
        there_lane.read_shared(PAYMENTS).unwrap().version,
        2,
        "nothing written"
    );
    // It learned the newer state doing so: CLOSED v2, locally CLOSED again.
    poll(SETUP, "CLOSED v2 on the page", || async {
        (row(&browser, PAYMENTS).await == json!(["closed", "CLOSED", "v2"])).then_some(())
    })
    .await;
    // Closing what is closed writes nothing.
    browser.click(close).await;
    browser
        .click("#detail button[data-action=\"confirm-fleet-close\"]")
        .await;
    browser.notice("already CLOSED v2; nothing written").await;
    assert_eq!(there_lane.read_shared(PAYMENTS).unwrap().version, 2);

    // A wrong token writes nothing either.
    token.clear().await.unwrap();
    token.send_keys("not-the-token").await.unwrap();
    browser.click(trip).await;
    browser
        .click("#detail button[data-action=\"confirm-fleet-trip\"]")
        .await;
    browser.notice("Wrong operator token").await;
    let shared = there_lane.read_shared(PAYMENTS).unwrap();
    assert_eq!((shared.state, shared.version), (State::Closed, 2));

    // The activity log has the fleet-wide action, told apart from local ones.
    let logged = browser
        .js(
            "return [...document.querySelectorAll('#activity li[data-action=\"fleet_trip\"] .what')].map((w) => w.textContent);",
            vec![],
        )
        .await;
    assert!(logged.to_string().contains("fleet-wide trip"), "{logged}");
    browser.screenshot("dashboard-fleet.png").await;
    browser.client.clone().close().await.unwrap();
    here.close_all();
    there.close_all();
}
