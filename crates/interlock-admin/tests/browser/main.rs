//! The dashboard in a real headless Chromium, driven through chromedriver
//! (WebDriver):
//!
//! - `small`: four breakers as cards; a trip by traffic shows within a
//!   second without a reload; the force-open button works with the right
//!   token and does nothing with a wrong one; hostile names render as text.
//! - `scale`: 1,000 breakers as a table: filter, sort, search, keyboard,
//!   a card opened, an operator action without, with a wrong and with the
//!   right token; the first message's size and the bytes per second of a
//!   tab, measured on the wire by a proxy in front of the server; a tab in
//!   the background receives nothing.
//! - `removal`: 25 per-host breakers as a table; one removed from the
//!   registry and two expired by `expire_after_idle` leave the page
//!   without a reload.
//! - `fleet`: a registry coordinated through a real `redis-server`: the
//!   fleet columns and the fenced fleet-wide trip and close.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`scripts/test-all`
//! installs them); the test installs them itself with apt-get when it can,
//! and fails, never skips, when it cannot. `CHROMIUM` and `CHROMEDRIVER`
//! override where they are looked for.
//!
//! Screenshots go to `docs/img/` with `INTERLOCK_SCREENSHOT=1`, and under
//! the target directory otherwise.
#![allow(
    clippy::unwrap_used,
    reason = "setup helpers: a failure fails the test"
)]

#[path = "../support/mod.rs"]
mod support;

#[path = "../../../interlock-redis/tests/redis/support.rs"]
#[allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    reason = "shared with interlock-redis's tests"
)]
mod redis_support;

mod fleet;
mod proxy;
mod removal;
mod scale;
mod small;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use interlock::ManualClock;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use support::poll;

/// Generous bounds for setup steps: a cold Chromium start on a 2-core machine
/// at load 12 took more than 30 s once (a deadline, not a wait).
const SETUP: Duration = Duration::from_secs(120);

/// Installs, once per page, what [`Browser::click`] and [`Browser::notice`]
/// read: whether a click reached an element of `window.__clickTarget`
/// (a capture listener on the document, so it sees the click before any
/// handler), and every text the notice line showed (`window.__notices`).
const RECORDERS: &str = "if (!window.__recorders) {
    window.__recorders = true;
    window.__notices = [];
    window.__clickTarget = null;
    window.__clickHit = false;
    const line = document.getElementById('notice');
    new MutationObserver(() => { if (line.textContent) window.__notices.push(line.textContent); })
        .observe(line, { childList: true, characterData: true, subtree: true });
    document.addEventListener('click', (e) => {
        if (window.__clickTarget && e.target instanceof Element && e.target.closest(window.__clickTarget)) {
            window.__clickHit = true;
        }
    }, true);
}
";

const TOKEN: &str = "s3cret-token-0123456789abcdef";

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

/// A fresh, empty directory under the target directory, removed on drop.
///
/// Chromium, orphaned when its chromedriver is killed, can still write to
/// its profile as it shuts down, after the drop removed it; so each new
/// directory first sweeps those of `tag` left by test processes that are
/// no longer running (on Linux, where `/proc` says which are).
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
        Self::sweep(root, tag);
        let dir = root.join(format!("{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// Removes the `{tag}-{pid}-{n}` directories of exited processes.
    fn sweep(root: &Path, tag: &str) {
        if !Path::new("/proc/self").exists() {
            return;
        }
        let Ok(entries) = std::fs::read_dir(root) else {
            return;
        };
        let prefix = format!("{tag}-");
        for entry in entries.flatten() {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok());
            if let Some(pid) = pid {
                if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One browser at a time: the tests of this binary run in parallel, and
/// three Chromiums at once on a shared two-core machine make timing checks
/// (a trip on the page within a second) a matter of luck.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A chromedriver on a free loopback port and one headless session with a
/// fresh profile, ended (and the driver killed) on drop.
struct Browser {
    client: Client,
    _driver: Child,
    _profile: TempDir,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Browser {
    async fn start(width: u32, height: u32) -> Browser {
        let turn = ONE_AT_A_TIME.lock().await;
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
        let profile = TempDir::new("chromium-profile");
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
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                    format!("--user-data-dir={}", profile.0.display()),
                    "--hide-scrollbars",
                    "--force-color-profile=srgb",
                    format!("--window-size={width},{height}"),
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
            _profile: profile,
            _turn: turn,
        }
    }

    async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        match self.client.execute(script, args).await {
            Ok(value) => value,
            Err(e) => panic!("{e}\nin the script:\n{script}"),
        }
    }

    /// Polls a script until it returns something truthy; returns it.
    async fn until(&self, what: &str, script: &str, args: Vec<Value>) -> Value {
        poll(SETUP, what, || {
            let args = args.clone();
            async move {
                let v = self.client.execute(script, args).await.ok()?;
                let truthy = !(v.is_null() || v == false || v == 0 || v == "");
                truthy.then_some(v)
            }
        })
        .await
    }

    /// Clicks the element `css` selects, as a user does (WebDriver's element
    /// click: scrolled into view, pointer events at its centre).
    ///
    /// The page updates live, so the element can move between the moment
    /// WebDriver computes where to press and the moment it presses; the
    /// press then lands beside it and nothing happens. A page-side recorder
    /// ([`RECORDERS`]) tells whether the click reached an element `css`
    /// selects; a click that did not (no handler ran, so nothing was done)
    /// is made again, a few times. Whatever the page does in response is
    /// the test's to check, never retried here.
    async fn click(&self, css: &str) {
        const ATTEMPTS: u32 = 5;
        for attempt in 1..=ATTEMPTS {
            self.js(
                &[
                    RECORDERS,
                    "window.__clickTarget = arguments[0]; window.__clickHit = false; window.__notices = [];",
                ]
                .concat(),
                vec![json!(css)],
            )
            .await;
            self.client
                .find(fantoccini::Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("{css}: {e}"))
                .click()
                .await
                .unwrap_or_else(|e| panic!("clicking {css}: {e}"));
            // The click's events are dispatched before the command returns;
            // a moment more for a renderer starved by the machine's load.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
            loop {
                if self.js("return window.__clickHit === true;", vec![]).await == true {
                    return;
                }
                if tokio::time::Instant::now() >= deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            eprintln!(
                "browser test: click {attempt} of {ATTEMPTS} on {css} did not reach it \
                 (the page may have moved under the pointer); clicking again"
            );
        }
        panic!("{css}: {ATTEMPTS} clicks, none reached the element");
    }

    /// The text of a notice containing `needle`, shown since the last
    /// [`click`](Self::click): the recorder keeps every notice, since the
    /// line clears itself after 8 s and a poll slowed by load could miss
    /// one.
    async fn notice(&self, needle: &str) -> String {
        self.until(
            &format!("a notice with {needle:?}"),
            "const seen = (window.__notices || []).concat([document.getElementById('notice').textContent]);
             return seen.find((t) => t.includes(arguments[0])) || null;",
            vec![json!(needle)],
        )
        .await
        .as_str()
        .unwrap()
        .to_owned()
    }

    /// Waits for two animation frames (a redraw), then takes a screenshot
    /// to `name` (see the crate docs).
    async fn screenshot(&self, name: &str) {
        self.js(
            "document.activeElement && document.activeElement.blur && document.activeElement.blur();
             window.dispatchEvent(new Event('resize'));",
            vec![],
        )
        .await;
        self.client
            .execute_async(
                "const done = arguments[0];
                 requestAnimationFrame(() => requestAnimationFrame(() => done(true)));",
                vec![],
            )
            .await
            .unwrap();
        let png = self.client.screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let path = screenshot_path(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&path, &png).unwrap();
        eprintln!(
            "browser test: screenshot saved to {} ({} bytes)",
            path.display(),
            png.len()
        );
    }
}

impl Drop for Browser {
    /// A test that failed never ended its session, and Chromium outlives the
    /// chromedriver killed after this: end the processes started with this
    /// session's own profile directory (and only those), by their ids.
    fn drop(&mut self) {
        let marker = format!("--user-data-dir={}", self._profile.0.display());
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in procs.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            if cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == marker.as_bytes())
            {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

fn screenshot_path(name: &str) -> PathBuf {
    match std::env::var("INTERLOCK_SCREENSHOT") {
        Ok(v) if v == "1" => std::env::var_os("CARGO_MANIFEST_DIR")
            .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
            .join("../../docs/img")
            .join(name),
        _ => Path::new(env!("CARGO_TARGET_TMPDIR")).join(name),
    }
}

/// From now on the manual clock keeps up with real time (until the
/// runtime ends).
fn tick_with_real_time(clock: &ManualClock) {
    let ticking = clock.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        let mut last = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            let now = tokio::time::Instant::now();
            ticking.advance(now - last);
            last = now;
        }
    });
}
