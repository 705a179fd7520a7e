//! The dashboard in a real headless Chromium, driven through chromedriver
//! (WebDriver): a breaker tripped by traffic turns OPEN on the page within a
//! second without a reload; the force-open button works with the right
//! token and does nothing with a wrong one; hostile names render as text.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`scripts/test-all`
//! installs them); the test installs them itself with apt-get when it can,
//! and fails, never skips, when it cannot. `CHROMIUM` and `CHROMEDRIVER`
//! override where they are looked for.
//!
//! It saves a screenshot of the page: to `docs/img/dashboard.png` with
//! `INTERLOCK_SCREENSHOT=1`, to the path in `INTERLOCK_SCREENSHOT` if it is
//! another value, and under the target directory otherwise.
#![allow(
    clippy::unwrap_used,
    reason = "setup helpers: a failure fails the test"
)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use axum::Router;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use interlock::{Config, ManualClock, Registry, SlidingWindow, State};
use interlock_admin::{Admin, EventFeed};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use support::{poll, serve};

const TOKEN: &str = "s3cret-token-0123456789abcdef";
const PAYMENTS: &str = "payments-gateway";
const INVENTORY: &str = "inventory-db";
const SEARCH: &str = "search-api";
/// Markup and quotes in a name: must show as these characters, verbatim.
const HOSTILE: &str = "<script>alert(\"pwned\")</script><img src=x onerror='alert(1)'>";

/// Generous bounds for setup steps (a cold Chromium start on a busy machine).
const SETUP: Duration = Duration::from_secs(30);

// ---- locating (or installing) Chromium and chromedriver -------------------

fn find_program(env: &str, candidates: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(env) {
        return Some(PathBuf::from(path)).filter(|p| p.is_file());
    }
    let dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for candidate in candidates {
        let path = Path::new(candidate);
        if path.is_absolute() {
            if path.is_file() {
                return Some(path.to_owned());
            }
        } else if let Some(found) = dirs.iter().map(|d| d.join(path)).find(|p| p.is_file()) {
            return Some(found);
        }
    }
    None
}

fn locate() -> Option<(PathBuf, PathBuf)> {
    let chromium = find_program(
        "CHROMIUM",
        &["chromium", "chromium-browser", "/usr/lib/chromium/chromium"],
    )?;
    let driver = find_program(
        "CHROMEDRIVER",
        &["chromedriver", "/usr/lib/chromium/chromedriver"],
    )?;
    Some((chromium, driver))
}

/// Chromium and chromedriver, installed with apt-get if they are missing;
/// panics with what to do if that is not possible.
async fn chromium_and_driver() -> (PathBuf, PathBuf) {
    if let Some(found) = locate() {
        return found;
    }
    eprintln!("browser test: chromium or chromedriver is missing; installing them with apt-get");
    let mut log = String::new();
    for args in [
        &["install", "-y", "-qq", "chromium", "chromium-driver"][..],
        &["update", "-qq"][..],
        &["install", "-y", "-qq", "chromium", "chromium-driver"][..],
    ] {
        match Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output()
            .await
        {
            Ok(out) => log.push_str(&String::from_utf8_lossy(&out.stderr)),
            Err(e) => log.push_str(&format!("apt-get {args:?}: {e}\n")),
        }
        if let Some(found) = locate() {
            return found;
        }
    }
    let overrides: Vec<String> = ["CHROMIUM", "CHROMEDRIVER"]
        .iter()
        .filter_map(|var| Some(format!("{var}={:?}", std::env::var_os(var)?)))
        .collect();
    panic!(
        "the dashboard test needs headless Chromium and chromedriver, and they are missing and \
         could not be installed. Install Debian's `chromium` and `chromium-driver` (run \
         `scripts/test-all` as root, or `apt-get install chromium chromium-driver`), or point \
         CHROMIUM and CHROMEDRIVER at them (set here: {overrides:?}). apt-get said:\n{log}"
    );
}

/// A chromedriver on a free loopback port and one headless session.
struct Browser {
    client: Client,
    _driver: Child,
}

impl Browser {
    async fn start() -> Browser {
        let (chromium, driver_path) = chromium_and_driver().await;
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let driver = Command::new(&driver_path)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", driver_path.display()));
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({
                "binary": chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--hide-scrollbars",
                    "--force-color-profile=srgb",
                    "--window-size=1400,1000",
                ],
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let client = poll(SETUP, "a chromedriver session", || {
            let (url, capabilities) = (url.clone(), capabilities.clone());
            async move {
                ClientBuilder::new(HttpConnector::new())
                    .capabilities(capabilities)
                    .connect(&url)
                    .await
                    .ok()
            }
        })
        .await;
        Browser {
            client,
            _driver: driver,
        }
    }

    async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.unwrap()
    }

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

// ---- the scene ----------------------------------------------------------------

/// Five minutes of history, made in a blink on the manual clock: calls on
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
    for second in 0u64..295 {
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

fn screenshot_path() -> PathBuf {
    match std::env::var("INTERLOCK_SCREENSHOT") {
        Ok(v) if v == "1" => {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/img/dashboard.png")
        }
        Ok(v) if !v.is_empty() => PathBuf::from(v),
        _ => Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png"),
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

    // From now on the manual clock keeps up with real time.
    let ticking = clock.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut last = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            let now = tokio::time::Instant::now();
            ticking.advance(now - last);
            last = now;
        }
    });

    let addr = serve(Router::new().nest("/interlock", admin.router())).await;
    let browser = Browser::start().await;
    let started = tokio::time::Instant::now();
    browser
        .client
        .goto(&format!("http://{addr}/interlock"))
        .await
        .unwrap();

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
    assert_eq!(rendered["scripts"], 1, "only the page's own script");

    // The timelines are drawn: state segments and a failure-rate line each.
    let drawn = browser
        .js(
            "return [...document.querySelectorAll('.card svg.timeline')].map((s) =>
                 [s.querySelectorAll('rect.band').length, s.querySelectorAll('polyline.rate').length]);",
            vec![],
        )
        .await;
    for card in drawn.as_array().unwrap() {
        assert!(card[0].as_u64().unwrap() >= 1 && card[1] == 1, "{drawn}");
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
    browser
        .client
        .find(Locator::Css(&force_open))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    poll(SETUP, "the wrong-token notice", || async {
        let text = browser
            .js(
                "return document.getElementById('notice').textContent;",
                vec![],
            )
            .await;
        text.as_str()
            .filter(|t| t.contains("Wrong operator token"))
            .map(|_| ())
    })
    .await;
    assert_eq!(payments.state(), State::Open);

    // The right token force-opens it.
    token_field.clear().await.unwrap();
    token_field.send_keys(TOKEN).await.unwrap();
    browser
        .client
        .find(Locator::Css(&force_open))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
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
    browser
        .js(
            "document.activeElement.blur(); window.dispatchEvent(new Event('resize'));",
            vec![],
        )
        .await;
    poll(SETUP, "a redraw at the new size", || async {
        let done = browser
            .js(
                "return new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))));",
                vec![],
            )
            .await;
        (done == true).then_some(())
    })
    .await;
    let png = browser.client.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let path = screenshot_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&path, &png).unwrap();
    eprintln!(
        "browser test: screenshot saved to {} ({} bytes); page checks took {:?}",
        path.display(),
        png.len(),
        started.elapsed()
    );
    browser.client.close().await.unwrap();
}
