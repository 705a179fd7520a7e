//! 1,000 breakers (the per-host breakers of a large service): the table by
//! default, filter, sort, search, keyboard, a card opened, an operator
//! action without, with a wrong and with the right token, the size of the
//! first message, the bytes per second a tab costs while 5 % of the
//! breakers change each second (measured on the wire over 10 s), and
//! nothing at all for a tab in the background.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use fantoccini::Locator;
use fantoccini::key::Key;
use interlock::{Config, ManualClock, Registry, SlidingWindow, State};
use interlock_admin::{Admin, EventFeed};
use serde_json::{Value, json};

use crate::proxy::Proxy;
use crate::support::{poll, serve};
use crate::{Browser, SETUP, TOKEN, tick_with_real_time};

const BREAKERS: usize = 1_000;
/// The budgets.
const FIRST_MESSAGE_MAX: u64 = 250 * 1024;
const BYTES_PER_SECOND_MAX: u64 = 20 * 1024;
/// Breakers changed each second while measuring: 5 %.
const CHANGING_PER_SECOND: usize = BREAKERS / 20;
const MEASURE: Duration = Duration::from_secs(10);
/// A name with markup, among the thousand.
const HOSTILE: &str = "<img src=x onerror='alert(1)'>\"pool\"";

/// A per-host breaker name: `api-0042.pool-2.svc.internal`.
fn host(i: usize) -> String {
    format!("api-{i:04}.pool-{}.svc.internal", i % 10)
}

fn fail(registry: &Registry, name: &str) {
    let _ = registry
        .get(name)
        .call(|| Err::<(), _>(std::io::Error::other("connect timeout")));
}

fn succeed(registry: &Registry, name: &str) {
    let _ = registry.get(name).call(|| Ok::<_, std::io::Error>(()));
}

/// Four minutes in the life of 1,000 breakers, sampled every second on
/// the manual clock: failure rates from 0 to 40 %, one more call on 20 of
/// them each second, an outage that trips 40 between 60 s and 90 s, then
/// 20 force-opened at 150 s and 20 put in metrics-only at 200 s.
fn rehearse(clock: &ManualClock, registry: &Registry, admin: &Admin) -> Vec<String> {
    let mut names: Vec<String> = (0..BREAKERS - 1).map(host).collect();
    names.insert(500, HOSTILE.to_owned());
    for (i, name) in names.iter().enumerate() {
        let failures = i % 5; // of 10 calls: 0 % .. 40 %
        for c in 0..10 {
            if c < failures {
                fail(registry, name);
            } else {
                succeed(registry, name);
            }
        }
    }
    for second in 0..240usize {
        clock.advance(Duration::from_secs(1));
        for k in 0..20 {
            let i = (second * 20 + k) % names.len();
            if (second + k) % 4 == 0 {
                fail(registry, &names[i]);
            } else {
                succeed(registry, &names[i]);
            }
        }
        for (i, name) in names.iter().enumerate() {
            let tripping =
                matches!(i % 50, 3 | 17) && (60..90).contains(&second) && i % 30 == second - 60;
            if tripping {
                for _ in 0..15 {
                    fail(registry, name);
                }
            }
            if second == 150 && i % 50 == 29 {
                registry.get(name).force_open();
            }
            if second == 200 && i % 50 == 41 {
                registry.get(name).metrics_only();
            }
        }
        admin.sample_now();
    }
    names
}

/// The rows the table shows, in order: `[name, state, failure-rate text]`.
async fn rows(browser: &Browser) -> Vec<(String, String, String)> {
    let value = browser
        .js(
            "return [...document.querySelectorAll('#rows tr')].map((tr) =>
                 [tr.dataset.breaker, tr.dataset.state, tr.children[2].textContent]);",
            vec![],
        )
        .await;
    serde_json::from_value(value).unwrap()
}

fn percent(text: &str) -> f64 {
    text.trim_end_matches('%').parse().unwrap_or(-1.0)
}

/// Waits until the table shows exactly `n` rows.
async fn until_rows(browser: &Browser, what: &str, n: usize) {
    browser
        .until(
            what,
            "return document.querySelectorAll('#rows tr').length === arguments[0];",
            vec![json!(n)],
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_breakers_in_a_table_with_light_live_updates() {
    let clock = ManualClock::new();
    // A quarter of an hour shown: the breakers, created four minutes
    // before the page opens, start inside it however slow the machine.
    let feed = EventFeed::builder()
        .clock(clock.clone())
        .history(Duration::from_secs(15 * 60))
        .build()
        .unwrap();
    let registry = Registry::builder()
        .config(
            Config::builder()
                .failure_rate_threshold(0.5)
                .minimum_number_of_calls(10)
                .sliding_window(SlidingWindow::count(100))
                .wait_duration_in_open(Duration::from_secs(600))
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
        .build()
        .unwrap();
    let rehearsed = tokio::time::Instant::now();
    let names = rehearse(&clock, &registry, &admin);
    eprintln!(
        "browser test: four minutes of 1,000 breakers rehearsed in {:?}",
        rehearsed.elapsed()
    );
    assert_eq!(registry.len(), BREAKERS);
    let count = |state: State| {
        registry
            .items()
            .iter()
            .filter(|(_, b)| b.state() == state)
            .count()
    };
    let open = count(State::Open);
    assert!(open >= 40, "{open} open");
    // The browser first (it may wait for another test's), then the
    // manual clock keeps up with real time.
    let browser = Browser::start(1500, 1000).await;
    tick_with_real_time(&clock);

    let server = serve(admin.mount(Router::new(), "/interlock").unwrap()).await;
    let proxy = Proxy::start(server).await;
    let page = format!("http://{}/interlock", proxy.addr);
    browser.client.goto(&page).await.unwrap();

    // ---- the first message, and the table as the default view ----------
    until_rows(&browser, "1,000 rows", BREAKERS).await;
    let first = browser.js("return window.interlockStats;", vec![]).await;
    let first_message = first["firstInitBytes"].as_u64().unwrap();
    eprintln!(
        "browser test: first message {first_message} bytes for {BREAKERS} breakers ({:.1} KB)",
        first_message as f64 / 1024.0
    );
    assert!(
        first_message <= FIRST_MESSAGE_MAX,
        "the first message is {first_message} bytes"
    );
    assert_eq!(first["inits"], 1);
    let layout = browser
        .js(
            "return [document.getElementById('table-wrap').hidden, document.getElementById('cards').hidden,
                     document.getElementById('view-table').getAttribute('aria-pressed'),
                     document.querySelectorAll('#cards .card').length];",
            vec![],
        )
        .await;
    assert_eq!(
        layout,
        json!([false, true, "true", 0]),
        "the table, no card"
    );
    // The hostile name is text in its row.
    let hostile = browser
        .js(
            "const tr = [...document.querySelectorAll('#rows tr')].find((r) => r.dataset.breaker === arguments[0]);
             const b = tr.querySelector('button.open');
             return [b.textContent, b.children.length, document.querySelectorAll('img').length];",
            vec![json!(HOSTILE)],
        )
        .await;
    assert_eq!(hostile, json!([HOSTILE, 0, 0]));

    // ---- sorted by state by default: what needs attention first ---------
    let table = rows(&browser).await;
    assert!(table[..open].iter().all(|r| r.1 == "open"), "OPEN first");
    let sort = browser
        .js(
            "return document.querySelector('th[aria-sort]').dataset.key + ' ' +
                    document.querySelector('th[aria-sort]').getAttribute('aria-sort');",
            vec![],
        )
        .await;
    assert_eq!(sort, "state ascending");

    // ---- filter by state -------------------------------------------------
    browser.click("#filters button[data-state=\"open\"]").await;
    until_rows(&browser, "only OPEN rows", open).await;
    let table = rows(&browser).await;
    assert!(table.iter().all(|r| r.1 == "open"), "{table:?}");
    let pressed = browser
        .js(
            "return [...document.querySelectorAll('#filters button[aria-pressed=\"true\"]')].map((b) => b.dataset.state);",
            vec![],
        )
        .await;
    assert_eq!(pressed, json!(["open"]));
    let shown = browser
        .js(
            "return document.getElementById('shown').textContent;",
            vec![],
        )
        .await;
    assert_eq!(shown, format!("Showing {open} of {BREAKERS}"));
    browser.click("#filters button[data-state=\"all\"]").await;
    until_rows(&browser, "every row again", BREAKERS).await;

    // ---- sort by failure rate, both ways ---------------------------------
    browser
        .click("button.sort[data-sort=\"failure_rate\"]")
        .await;
    browser
        .until(
            "sorted by failure rate, descending",
            "const th = document.querySelector('th[aria-sort]');
             return th.dataset.key === 'failure_rate' && th.getAttribute('aria-sort') === 'descending';",
            vec![],
        )
        .await;
    let rates: Vec<f64> = rows(&browser).await.iter().map(|r| percent(&r.2)).collect();
    assert!(rates.windows(2).all(|w| w[0] >= w[1]), "{rates:?}");
    assert!(rates[0] >= 50.0, "a tripped breaker first: {rates:?}");
    browser
        .click("button.sort[data-sort=\"failure_rate\"]")
        .await;
    browser
        .until(
            "sorted by failure rate, ascending",
            "return document.querySelector('th[aria-sort]').getAttribute('aria-sort') === 'ascending';",
            vec![],
        )
        .await;
    let rates: Vec<f64> = rows(&browser).await.iter().map(|r| percent(&r.2)).collect();
    assert!(rates.windows(2).all(|w| w[0] <= w[1]), "{rates:?}");
    // By name.
    browser.click("button.sort[data-sort=\"name\"]").await;
    browser
        .until(
            "sorted by name",
            "return document.querySelector('th[aria-sort]').dataset.key === 'name';",
            vec![],
        )
        .await;
    let by_name: Vec<String> = rows(&browser).await.into_iter().map(|r| r.0).collect();
    assert_eq!(by_name.len(), BREAKERS);
    assert_eq!(by_name[0], HOSTILE, "punctuation before letters");
    let mut hosts: Vec<String> = names.iter().filter(|n| *n != HOSTILE).cloned().collect();
    hosts.sort();
    assert_eq!(by_name[1..], hosts[..]);

    // ---- search by name --------------------------------------------------
    let search = browser.client.find(Locator::Id("search")).await.unwrap();
    search.send_keys("0042").await.unwrap();
    until_rows(&browser, "one row for 0042", 1).await;
    assert_eq!(rows(&browser).await[0].0, host(42));
    search.clear().await.unwrap();
    search.send_keys("pool-7").await.unwrap();
    let pool7 = names.iter().filter(|n| n.contains("pool-7")).count();
    until_rows(&browser, "the pool-7 rows", pool7).await;
    assert!(rows(&browser).await.iter().all(|r| r.0.contains("pool-7")));

    // ---- keyboard: one tab stop for the table, arrows between rows, Enter
    // opens the card, Escape closes it and gives focus back ---------------
    search.send_keys(&Key::Tab).await.unwrap();
    let mut tabs = 0;
    let first_row = loop {
        let active = browser
            .js(
                "const a = document.activeElement;
                 return [a.tagName, a.className, a.textContent, a.closest('tr') ? a.closest('tr').dataset.breaker : null];",
                vec![],
            )
            .await;
        if active[1] == "open" {
            break active[3].as_str().unwrap().to_owned();
        }
        tabs += 1;
        assert!(tabs < 30, "Tab never reached the table: {active}");
        browser
            .client
            .active_element()
            .await
            .unwrap()
            .send_keys(&Key::Tab)
            .await
            .unwrap();
    };
    let order = rows(&browser).await;
    assert_eq!(first_row, order[0].0, "Tab lands on the first row");
    let active = browser.client.active_element().await.unwrap();
    active.send_keys(&Key::Down).await.unwrap();
    let second = browser
        .js(
            "return document.activeElement.closest('tr').dataset.breaker;",
            vec![],
        )
        .await;
    assert_eq!(second, order[1].0.as_str());
    browser
        .client
        .active_element()
        .await
        .unwrap()
        .send_keys(&Key::Enter)
        .await
        .unwrap();
    let opened = browser
        .until(
            "the card opened from the keyboard",
            "const card = document.querySelector('#detail .card');
             return card && !document.getElementById('detail').hidden
                 && document.activeElement === card.querySelector('h2') ? card.dataset.breaker : null;",
            vec![],
        )
        .await;
    assert_eq!(opened, order[1].0.as_str());
    browser
        .client
        .active_element()
        .await
        .unwrap()
        .send_keys(&Key::Escape)
        .await
        .unwrap();
    browser
        .until(
            "the card closed, focus back on its row",
            "return document.getElementById('detail').hidden
                 && document.activeElement.closest('tr')
                 && document.activeElement.closest('tr').dataset.breaker === arguments[0]
                 && document.activeElement.getAttribute('aria-expanded') === 'false';",
            vec![json!(order[1].0)],
        )
        .await;
    search.clear().await.unwrap();
    browser
        .js(
            "const s = document.getElementById('search'); s.value = ''; s.dispatchEvent(new Event('input'));",
            vec![],
        )
        .await;
    until_rows(&browser, "every row again", BREAKERS).await;

    // ---- a card opened: its timeline, its state since, its buttons -------
    let target = names
        .iter()
        .find(|n| registry.get(n).state() == State::Open)
        .unwrap()
        .clone();
    browser
        .js(
            "[...document.querySelectorAll('#rows tr')].find((r) => r.dataset.breaker === arguments[0])
                 .querySelector('button.open').click();",
            vec![json!(target)],
        )
        .await;
    let card = browser
        .until(
            "the card with its timeline",
            "const card = document.querySelector('#detail .card');
             if (!card || card.dataset.breaker !== arguments[0]) return null;
             const svg = card.querySelector('svg.timeline');
             if (!svg.querySelector('rect.band') || !svg.querySelector('polyline.rate')) return null;
             return {
                 title: card.querySelector('h2').textContent,
                 badge: card.querySelector('.badge').textContent,
                 label: svg.getAttribute('aria-label'),
                 local: [...card.querySelectorAll('button[data-scope=\"local\"]')].map((b) => b.dataset.action),
                 fleet: card.querySelector('fieldset.fleet-actions').hidden,
                 legend: card.querySelector('fieldset.local legend').textContent,
                 created: svg.querySelectorAll('line.created').length,
                 since: card.querySelector('dl.stats').querySelectorAll('dd .value')[3].textContent,
             };",
            vec![json!(target)],
        )
        .await;
    assert_eq!(card["title"], target.as_str());
    assert_eq!(card["badge"], "OPEN");
    assert!(
        card["label"].as_str().unwrap().contains("OPEN for"),
        "{card}"
    );
    assert_eq!(
        card["local"],
        json!(["force-open", "disable", "metrics-only", "reset"])
    );
    assert_eq!(card["fleet"], true, "no fleet buttons: not coordinated");
    assert!(
        card["legend"].as_str().unwrap().contains("This instance"),
        "{card}"
    );
    // Created four minutes ago, inside the 15 the timeline shows: it
    // says where it starts; the card says how long it has been OPEN.
    assert_eq!(card["created"], 1, "{card}");
    let in_state = card["since"].as_str().unwrap();
    assert!(
        in_state.ends_with(" s") || in_state.contains("min"),
        "{card}"
    );

    // Screenshot: the table with the card beside it.
    browser.screenshot("dashboard-card.png").await;

    // ---- an operator action: no token, a wrong one, the right one --------
    let force = "#detail button[data-action=\"force-open\"]";
    browser.click(force).await;
    browser.notice("Enter the operator token first").await;
    assert_eq!(registry.get(&target).state(), State::Open, "nothing sent");
    let token = browser.client.find(Locator::Id("token")).await.unwrap();
    token.send_keys("wrong-token").await.unwrap();
    browser.click(force).await;
    browser.notice("Wrong operator token").await;
    assert_eq!(registry.get(&target).state(), State::Open);
    token.clear().await.unwrap();
    token.send_keys(TOKEN).await.unwrap();
    browser.click(force).await;
    browser.notice("Force open on this instance").await;
    assert_eq!(registry.get(&target).state(), State::ForcedOpen);
    browser
        .until(
            "FORCED OPEN in the row and the card",
            "const tr = [...document.querySelectorAll('#rows tr')].find((r) => r.dataset.breaker === arguments[0]);
             return tr.dataset.state === 'forced_open'
                 && document.querySelector('#detail .badge').textContent === 'FORCED OPEN';",
            vec![json!(target)],
        )
        .await;
    // No token anywhere but in the header: not in the page's URL, not in
    // storage.
    let leaks = browser
        .js(
            "return [location.href, document.cookie, JSON.stringify(localStorage), JSON.stringify(sessionStorage),
                     performance.getEntriesByType('resource').map((e) => e.name).join(' ')];",
            vec![],
        )
        .await;
    assert!(!leaks.to_string().contains(TOKEN), "{leaks}");

    // Screenshot: the table sorted by state, the card closed.
    browser
        .js(
            "document.querySelector('#detail button.close').click();",
            vec![],
        )
        .await;
    browser.click("button.sort[data-sort=\"state\"]").await;
    browser.screenshot("dashboard-table.png").await;

    // ---- bytes per second of one tab, 5 % of the breakers changing -----
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = {
        let (registry, names, stop) = (registry.clone(), names.clone(), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            // A late tick does not make up for lost ones: never more than
            // 5 % a second.
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut next = 0;
            while !stop.load(Ordering::Acquire) {
                tick.tick().await;
                for _ in 0..CHANGING_PER_SECOND {
                    // One more call moves the window of a CLOSED breaker.
                    let name = &names[next % names.len()];
                    next += 7;
                    if next % 3 == 0 {
                        fail(&registry, name);
                    } else {
                        succeed(&registry, name);
                    }
                }
            }
        })
    };
    // Let one sample of the traffic pass, then measure.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let wire_before = proxy.event_bytes();
    let page_before = browser.js("return window.interlockStats;", vec![]).await;
    let started = tokio::time::Instant::now();
    tokio::time::sleep(MEASURE).await;
    let wire = proxy.event_bytes() - wire_before;
    let elapsed = started.elapsed();
    let page_after = browser.js("return window.interlockStats;", vec![]).await;
    stop.store(true, Ordering::Release);
    traffic.await.unwrap();
    let page_bytes = page_after["bytes"].as_u64().unwrap() - page_before["bytes"].as_u64().unwrap();
    let by_kind = |kind: &str| {
        page_after["byEvent"][kind].as_u64().unwrap_or(0)
            - page_before["byEvent"][kind].as_u64().unwrap_or(0)
    };
    eprintln!(
        "browser test: of the message data, {} bytes of deltas, {} bytes of events",
        by_kind("delta"),
        by_kind("event")
    );
    let messages =
        page_after["messages"].as_u64().unwrap() - page_before["messages"].as_u64().unwrap();
    let per_second = wire as f64 / elapsed.as_secs_f64();
    eprintln!(
        "browser test: {wire} bytes on the wire in {elapsed:?} ({:.1} KB/s per tab; {page_bytes} bytes of \
         message data in {messages} messages) with {CHANGING_PER_SECOND} of {BREAKERS} breakers changing per second",
        per_second / 1024.0
    );
    assert!(
        wire <= BYTES_PER_SECOND_MAX * elapsed.as_secs(),
        "{per_second:.0} B/s per tab"
    );
    assert!(messages >= 8, "the deltas flowed: {messages} messages");
    assert_eq!(page_after["inits"], 1, "no fresh snapshot while measuring");

    // ---- a tab in the background costs nothing -------------------------
    assert_eq!(proxy.open_streams(), 1);
    let front = browser.client.window().await.unwrap();
    let other = browser.client.new_window(true).await.unwrap();
    browser.client.switch_to_window(other.handle).await.unwrap();
    browser.client.goto("about:blank").await.unwrap();
    poll(SETUP, "the hidden tab's stream closed", || async {
        (proxy.open_streams() == 0).then_some(())
    })
    .await;
    let hidden_before = proxy.event_bytes();
    for name in names.iter().take(CHANGING_PER_SECOND) {
        fail(&registry, name);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        proxy.event_bytes(),
        hidden_before,
        "a hidden tab receives nothing"
    );
    assert_eq!(proxy.open_streams(), 0);
    browser.client.close_window().await.unwrap();
    browser.client.switch_to_window(front).await.unwrap();
    // Back in front: a fresh snapshot, live again.
    let back: Value = browser
        .until(
            "the tab live again",
            "const s = window.interlockStats;
             return s.inits === 2 && document.getElementById('conn').dataset.status === 'live' ? s : null;",
            vec![],
        )
        .await;
    assert_eq!(back["connects"], 2, "{back}");
    assert_eq!(proxy.open_streams(), 1);
    browser.client.clone().close().await.unwrap();
}
