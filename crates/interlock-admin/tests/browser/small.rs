//! Four breakers, shown as cards: five minutes of history drawn at once, a
//! trip by traffic on the page within a second without a reload, the
//! force-open button with a wrong and the right token, hostile names as
//! text, and the page before its first message.

use std::time::Duration;

use axum::Router;
use fantoccini::Locator;
use interlock::{Config, ManualClock, Registry, SlidingWindow, State};
use interlock_admin::{Admin, EventFeed};
use serde_json::json;

use crate::proxy::Proxy;
use crate::support::{poll, serve};
use crate::{Browser, SETUP, TOKEN, tick_with_real_time};

const PAYMENTS: &str = "payments-gateway";
const INVENTORY: &str = "inventory-db";
const SEARCH: &str = "search-api";
/// Markup and quotes in a name: must show as these characters, verbatim.
const HOSTILE: &str = "<script>alert(\"pwned\")</script><img src=x onerror='alert(1)'>";

impl Browser {
    /// `[state, badge text]` of the card of `name`, if it is on the page.
    async fn card_state(&self, name: &str) -> Option<(String, String)> {
        let value = self
            .js(
                "const card = [...document.querySelectorAll('.card')]
                     .find((c) => c.dataset.breaker === arguments[0]);
                 return card ? [card.dataset.state, card.querySelector('.badge').textContent] : null;",
                vec![json!(name)],
            )
            .await;
        serde_json::from_value(value).ok()
    }
}

/// Four minutes of history, made in a blink on the manual clock: calls on
/// every breaker each second and a sample after each second.
fn rehearse(clock: &ManualClock, registry: &Registry, admin: &Admin) {
    let call = |name: &str, fail: bool| {
        let _ = registry.get(name).call(|| {
            if fail {
                Err(std::io::Error::other(
                    "upstream answered 503 Service Unavailable",
                ))
            } else {
                Ok(())
            }
        });
    };
    for second in 0u64..240 {
        for i in 0u64..5 {
            let n = second * 5 + i;
            // payments: a few failures, healthy.
            call(PAYMENTS, n % 23 == 11);
            // inventory: an outage from 90 s to 150 s; failed probe rounds re-open it.
            let down = (90..150).contains(&second);
            call(INVENTORY, if down { n % 10 < 7 } else { n % 31 == 17 });
            // search: a noisy dependency an operator put in metrics-only.
            let wave = (second / 20) % 3;
            call(SEARCH, (n * 7) % 10 < wave + 1);
            call(HOSTILE, n % 97 == 50);
        }
        if second == 200 {
            registry.get(SEARCH).metrics_only();
        }
        clock.advance(Duration::from_secs(1));
        admin.sample_now();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_shows_a_trip_live_and_the_force_open_button_works() {
    let clock = ManualClock::new();
    let feed = EventFeed::builder().clock(clock.clone()).build().unwrap();
    let registry = Registry::builder()
        .config(
            Config::builder()
                .failure_rate_threshold(0.5)
                .minimum_number_of_calls(10)
                .sliding_window(SlidingWindow::count(20))
                .wait_duration_in_open(Duration::from_secs(20))
                .permitted_calls_in_half_open(3)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .listener(feed.clone())
        .build()
        .unwrap();
    let admin = Admin::builder(registry.clone())
        .feed(feed)
        .bearer_token(TOKEN)
        .sample_interval(Duration::from_millis(250))
        .build()
        .unwrap();
    rehearse(&clock, &registry, &admin);
    assert_eq!(registry.get(PAYMENTS).state(), State::Closed);
    assert_eq!(registry.get(SEARCH).state(), State::MetricsOnly);

    // The browser first (it may wait for another test's), then the
    // manual clock keeps up with real time.
    let browser = Browser::start(1400, 1000).await;
    tick_with_real_time(&clock);

    let server = serve(admin.mount(Router::new(), "/interlock").unwrap()).await;
    let proxy = Proxy::start(server).await;
    let addr = proxy.addr;
    let started = tokio::time::Instant::now();

    // Before the first message: connecting, never "no breaker yet".
    proxy.hold_events(true);
    browser
        .client
        .goto(&format!("http://{addr}/interlock"))
        .await
        .unwrap();
    browser
        .until(
            "the page asking for its event stream",
            "return document.readyState === 'complete' && window.interlockStats && window.interlockStats.connects === 1;",
            vec![],
        )
        .await;
    poll(SETUP, "the stream's request at the proxy", || async {
        (proxy.streams_opened() == 1).then_some(())
    })
    .await;
    let before = browser
        .js(
            "const shown = (id) => !document.getElementById(id).hidden;
             return {
                 connecting: shown('connecting'),
                 text: document.getElementById('connecting').textContent,
                 empty: shown('empty'),
                 board: shown('board'),
                 conn: document.getElementById('conn-text').textContent,
                 inits: window.interlockStats.inits,
             };",
            vec![],
        )
        .await;
    assert_eq!(before["inits"], 0, "{before}");
    assert_eq!(before["connecting"], true, "{before}");
    assert!(
        before["text"].as_str().unwrap().contains("Connecting"),
        "{before}"
    );
    assert_eq!(
        before["empty"], false,
        "no 'No breaker yet' before the first message: {before}"
    );
    assert_eq!(before["board"], false, "{before}");
    assert!(
        before["conn"].as_str().unwrap().contains("connecting"),
        "{before}"
    );
    proxy.hold_events(false);

    // Every breaker shows up with its state.
    for (name, state, label) in [
        (PAYMENTS, "closed", "CLOSED"),
        (INVENTORY, "closed", "CLOSED"),
        (SEARCH, "metrics_only", "METRICS ONLY"),
        (HOSTILE, "closed", "CLOSED"),
    ] {
        let (got, badge) = poll(SETUP, &format!("the card of {name:?}"), || {
            browser.card_state(name)
        })
        .await;
        assert_eq!((got.as_str(), badge.as_str()), (state, label), "{name:?}");
    }

    // The hostile name is text: the exact characters, no element made of it.
    let rendered = browser
        .js(
            "const card = [...document.querySelectorAll('.card')]
                 .find((c) => c.dataset.breaker === arguments[0]);
             const title = card.querySelector('.name');
             return {
                 text: title.textContent,
                 children: title.children.length,
                 images: document.querySelectorAll('img').length,
                 scripts: document.querySelectorAll('script').length,
                 logged: [...document.querySelectorAll('#activity .name')].length,
             };",
            vec![json!(HOSTILE)],
        )
        .await;
    assert_eq!(rendered["text"], HOSTILE);
    assert_eq!(rendered["children"], 0);
    assert_eq!(rendered["images"], 0);
    assert_eq!(rendered["scripts"], 2, "only the page's own two scripts");

    // The config list names every limit an operator tunes, the stalled
    // round's (ruling D7) included: unset, it follows the 20 s open wait.
    let limit = browser
        .js(
            "const card = [...document.querySelectorAll('.card')]
                 .find((c) => c.dataset.breaker === arguments[0]);
             const dt = [...card.querySelectorAll('details.config dt')]
                 .find((d) => d.textContent === 'stalled round abandoned after');
             return dt ? dt.nextElementSibling.textContent : null;",
            vec![json!(PAYMENTS)],
        )
        .await;
    assert_eq!(limit, json!("20 s"));

    // Few breakers: cards, not the table. Their timelines are drawn from
    // the history each fetched: state segments and a failure-rate line.
    let view = browser
        .js(
            "return [document.getElementById('cards').hidden, document.getElementById('table-wrap').hidden,
                     document.getElementById('view-cards').getAttribute('aria-pressed')];",
            vec![],
        )
        .await;
    assert_eq!(view, json!([false, true, "true"]));
    let drawn = browser
        .until(
            "four timelines drawn",
            "const drawn = [...document.querySelectorAll('#cards .card svg.timeline')].map((s) =>
                 [s.querySelectorAll('rect.band').length, s.querySelectorAll('polyline.rate').length]);
             return drawn.length === 4 && drawn.every(([bands, rates]) => bands >= 1 && rates === 1) ? drawn : null;",
            vec![],
        )
        .await;
    // The timelines start where the breakers were created, 240 s before
    // the end of the 300 s shown (plus the seconds the page took): a
    // "created" mark in the first fifth, nothing before it.
    let created = browser
        .js(
            "return [...document.querySelectorAll('#cards svg.timeline')].map((s) => {
                 const mark = s.querySelector('line.created');
                 const first = Math.min(...[...s.querySelectorAll('rect.band')].map((r) => +r.getAttribute('x')));
                 return mark ? [+mark.getAttribute('x1') / +s.getAttribute('width'), +mark.getAttribute('x1'), first] : null;
             });",
            vec![],
        )
        .await;
    for mark in created.as_array().unwrap() {
        let (ratio, x, band) = (
            mark[0].as_f64().unwrap(),
            mark[1].as_f64().unwrap(),
            mark[2].as_f64().unwrap(),
        );
        assert!((0.0..0.21).contains(&ratio), "{created} {drawn}");
        assert!(band >= x - 0.5, "no state drawn before creation: {created}");
    }

    // A trip by traffic shows within a second, without a reload.
    browser.js("window.__sameDocument = true;", vec![]).await;
    let payments = registry.get(PAYMENTS);
    for _ in 0..40 {
        if payments.state() == State::Open {
            break;
        }
        let _ = payments.call(|| Err::<(), _>(std::io::Error::other("connection reset by peer")));
    }
    assert_eq!(payments.state(), State::Open);
    poll(
        Duration::from_secs(1),
        "OPEN on the page within a second of the trip",
        || async {
            browser
                .card_state(PAYMENTS)
                .await
                .filter(|(state, badge)| state == "open" && badge == "OPEN")
        },
    )
    .await;
    assert_eq!(
        browser
            .js("return window.__sameDocument === true;", vec![])
            .await,
        true
    );

    // A wrong token changes nothing and says so.
    let force_open = format!("[data-breaker=\"{PAYMENTS}\"] button[data-action=\"force-open\"]");
    let token_field = browser.client.find(Locator::Id("token")).await.unwrap();
    token_field.send_keys("not-the-token").await.unwrap();
    browser.click(&force_open).await;
    browser.notice("Wrong operator token").await;
    assert_eq!(payments.state(), State::Open);

    // The right token force-opens it.
    token_field.clear().await.unwrap();
    token_field.send_keys(TOKEN).await.unwrap();
    browser.click(&force_open).await;
    poll(SETUP, "the registry's breaker force-opened", || async {
        (payments.state() == State::ForcedOpen).then_some(())
    })
    .await;
    poll(SETUP, "FORCED OPEN on the page", || async {
        browser
            .card_state(PAYMENTS)
            .await
            .filter(|(state, badge)| state == "forced_open" && badge == "FORCED OPEN")
    })
    .await;
    let logged = browser
        .js(
            "return [...document.querySelectorAll('#activity li.k-operator .what')].map((w) => w.textContent);",
            vec![],
        )
        .await;
    assert!(
        logged
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("force open")),
        "{logged}"
    );

    // The trailing-slash form of the page's URL works as well.
    browser
        .client
        .goto(&format!("http://{addr}/interlock/"))
        .await
        .unwrap();
    poll(SETUP, "FORCED OPEN on the page at /interlock/", || async {
        browser
            .card_state(PAYMENTS)
            .await
            .filter(|(state, _)| state == "forced_open")
    })
    .await;

    // The picture: the whole page, once the redraws settled.
    let height = browser
        .js(
            "return document.documentElement.scrollHeight + window.outerHeight - window.innerHeight;",
            vec![],
        )
        .await
        .as_u64()
        .unwrap();
    browser
        .client
        .set_window_size(1400, u32::try_from(height).unwrap().clamp(600, 4000))
        .await
        .unwrap();
    browser.screenshot("dashboard-cards.png").await;
    eprintln!("browser test: page checks took {:?}", started.elapsed());
    browser.client.clone().close().await.unwrap();
}
