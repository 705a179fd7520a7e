//! Breakers the registry forgets leave the page (issue 27, "evicted
//! breakers leave"; issue 20, bounded registries): 25 per-host breakers in
//! the table view, one removed with `Registry::remove`, two expired by
//! `expire_after_idle`; their rows go without a reload, the others stay.

use std::time::Duration;

use axum::Router;
use interlock::{ManualClock, Registry};
use interlock_admin::{Admin, EventFeed};
use serde_json::json;

use crate::Browser;
use crate::support::serve;

fn host(i: usize) -> String {
    format!("host-{i:02}.example.com:443")
}

/// The names of the table's rows, in the page's order.
async fn shown(browser: &Browser) -> Vec<String> {
    let value = browser
        .js(
            "return [...document.querySelectorAll('#rows tr')].map((tr) => tr.dataset.breaker);",
            vec![],
        )
        .await;
    let mut names: Vec<String> = serde_json::from_value(value).unwrap();
    names.sort();
    names
}

/// Waits until the table shows exactly `n` rows, none of them `gone`.
async fn until_rows_without(browser: &Browser, what: &str, n: usize, gone: &[String]) {
    browser
        .until(
            what,
            "const names = [...document.querySelectorAll('#rows tr')].map((tr) => tr.dataset.breaker);
             return names.length === arguments[0] && !arguments[1].some((g) => names.includes(g));",
            vec![json!(n), json!(gone)],
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_and_expired_breakers_leave_the_page() {
    let clock = ManualClock::new();
    let feed = EventFeed::builder().clock(clock.clone()).build().unwrap();
    let registry = Registry::builder()
        .clock(clock.clone())
        .listener(feed.clone())
        .expire_after_idle(Duration::from_secs(600))
        .build()
        .unwrap();
    for i in 0..25 {
        let _ = registry.get(&host(i));
    }
    let admin = Admin::builder(registry.clone())
        .feed(feed)
        .sample_interval(Duration::from_millis(250))
        .build()
        .unwrap();
    admin.sample_now();

    let browser = Browser::start(1400, 1000).await;
    let addr = serve(admin.mount(Router::new(), "/interlock").unwrap()).await;
    browser
        .client
        .goto(&format!("http://{addr}/interlock/"))
        .await
        .unwrap();
    until_rows_without(&browser, "the table of 25 breakers", 25, &[]).await;
    let mut expected: Vec<String> = (0..25).map(host).collect();
    assert_eq!(shown(&browser).await, expected);

    // Removed by hand: the row goes without a reload.
    let removed = host(3);
    assert!(registry.remove(&removed).is_some());
    until_rows_without(
        &browser,
        "the removed breaker's row gone",
        24,
        std::slice::from_ref(&removed),
    )
    .await;
    expected.retain(|n| *n != removed);
    assert_eq!(shown(&browser).await, expected);
    browser
        .until(
            "the removal in the activity log",
            "return [...document.querySelectorAll('#activity li')].some((li) =>
                 li.textContent.includes(arguments[0]) && li.textContent.includes('removed'));",
            vec![json!(removed)],
        )
        .await;

    // Idle: every breaker but two is handed out at 300 s; at 601 s the next
    // get sweeps the two, whose rows go too.
    clock.advance(Duration::from_secs(300));
    let idle = [host(7), host(19)];
    for name in expected.iter().filter(|n| !idle.contains(n)) {
        let _ = registry.get(name);
    }
    clock.advance(Duration::from_secs(301));
    let _ = registry.get(&host(0));
    assert_eq!(registry.len(), 22);
    until_rows_without(&browser, "the expired breakers' rows gone", 22, &idle).await;
    expected.retain(|n| !idle.contains(n));
    assert_eq!(shown(&browser).await, expected);

    // The server side agrees: the JSON lists the same 22.
    let listed = browser
        .js(
            "const r = await fetch('breakers'); const j = await r.json();
             return j.breakers.map((b) => b.name).sort();",
            vec![],
        )
        .await;
    let listed: Vec<String> = serde_json::from_value(listed).unwrap();
    assert_eq!(listed, expected);
}
