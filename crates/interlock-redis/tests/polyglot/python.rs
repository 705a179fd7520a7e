//! The Python original in a process of its own: the virtual environment
//! with interlock-cb 2.8.2 (made once by `scripts/interlock-cb-venv` in the
//! cargo target directory), and [`Python`], one instance of
//! `tests/polyglot/instance.py` driven over its stdin and stdout.
//!
//! Shared by the tests of interlock-redis and interlock-cli (through
//! `#[path]`), so both find the script and the environment the same way.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::{Clock, MonotonicClock};
use serde_json::Value;

/// The virtual environment, found the same way by every test that runs the
/// original (the differential test of the core crate too).
#[path = "venv.rs"]
mod venv;

/// How long the Python process may take to start or to answer a command.
const ANSWER_LIMIT: Duration = Duration::from_secs(60);

/// This crate's folder: the one cargo names when it runs the test, else the
/// one the test was compiled in (a build directory shared by two checkouts
/// must read the files of the checkout it runs for).
pub fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

fn workspace() -> PathBuf {
    manifest_dir().join("../..")
}

/// The instance program.
pub fn instance_script() -> PathBuf {
    workspace().join("crates/interlock-redis/tests/polyglot/instance.py")
}

pub(crate) use venv::interpreter;

/// The options of one Python instance (`instance.py --help`).
#[derive(Clone, Debug)]
pub struct Options {
    pub url: String,
    pub name: String,
    pub prefix: Option<String>,
    pub poll: Duration,
    pub wait: Duration,
    pub permitted: u32,
    pub window: u32,
    pub min_calls: u32,
    pub ttl: Duration,
    pub retry_backoff: Duration,
}

impl Options {
    /// The settings the mixed-fleet tests use on both sides.
    pub fn new(url: String, name: &str) -> Options {
        Options {
            url,
            name: name.to_owned(),
            prefix: None,
            poll: Duration::from_millis(50),
            wait: Duration::from_millis(300),
            permitted: 3,
            window: 4,
            min_calls: 2,
            ttl: Duration::from_secs(30),
            retry_backoff: Duration::from_millis(500),
        }
    }

    fn args(&self) -> Vec<String> {
        let secs = |d: Duration| d.as_secs_f64().to_string();
        let mut args = vec![
            "--url".into(),
            self.url.clone(),
            "--name".into(),
            self.name.clone(),
            "--poll".into(),
            secs(self.poll),
            "--wait".into(),
            secs(self.wait),
            "--permitted".into(),
            self.permitted.to_string(),
            "--window".into(),
            self.window.to_string(),
            "--min-calls".into(),
            self.min_calls.to_string(),
            "--ttl".into(),
            secs(self.ttl),
            "--retry-backoff".into(),
            secs(self.retry_backoff),
        ];
        if let Some(prefix) = &self.prefix {
            args.extend(["--prefix".into(), prefix.clone()]);
        }
        args
    }
}

/// One running Python instance; killed (after a polite `quit`) on drop.
pub struct Python {
    label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Python {
    /// Starts `instance.py` with `python` and waits for it to be ready.
    pub fn start(python: &Path, label: &str, options: &Options) -> Python {
        let mut child = Command::new(python)
            .arg("-u")
            .arg(instance_script())
            .args(options.args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let pipe = child.stderr.take().expect("piped stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { return };
                let mut all = sink.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        let stdin = child.stdin.take();
        let mut python = Python {
            label: label.to_owned(),
            child,
            stdin,
            lines,
            stderr,
        };
        let ready = python.next_answer("start");
        assert_eq!(
            ready["interlock_cb"], "2.8.2",
            "{label}: not the original 2.8.2: {ready}"
        );
        python
    }

    fn next_answer(&mut self, what: &str) -> Value {
        let deadline = MonotonicClock.now().saturating_add(ANSWER_LIMIT);
        loop {
            let left = deadline.saturating_duration_since(MonotonicClock.now());
            match self.lines.recv_timeout(left) {
                Ok(line) => match serde_json::from_str::<Value>(&line) {
                    Ok(v) => return v,
                    // Anything else the library printed: keep it for the report.
                    Err(_) => self
                        .stderr
                        .lock()
                        .unwrap()
                        .push_str(&format!("(stdout) {line}\n")),
                },
                Err(RecvTimeoutError::Timeout) => panic!(
                    "{}: no answer to {what} within {ANSWER_LIMIT:?}; stderr:\n{}",
                    self.label,
                    self.stderr()
                ),
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "{}: exited ({:?}) before answering {what}; stderr:\n{}",
                    self.label,
                    self.child.try_wait(),
                    self.stderr()
                ),
            }
        }
    }

    /// What the process wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends one command and returns its answer; an `error` answer fails
    /// the test.
    pub fn ask(&mut self, request: Value) -> Value {
        let line = format!("{request}\n");
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("{}: cannot send {request}: {e}", self.label));
        let answer = self.next_answer(&request.to_string());
        if let Some(error) = answer.get("error") {
            panic!(
                "{}: {request} failed: {error}; stderr:\n{}",
                self.label,
                self.stderr()
            );
        }
        answer
    }

    /// One call through the breaker: `ok`, `failed`, `rejected` or
    /// `unexpected` (a storage error that reached the call).
    pub fn call(&mut self, ok: bool) -> String {
        let answer = self.ask(serde_json::json!({"cmd": "call", "ok": ok}));
        let result = answer["result"].as_str().unwrap_or_default().to_owned();
        assert_ne!(
            result, "unexpected",
            "{}: an error reached the call: {answer}",
            self.label
        );
        result
    }

    /// The breaker's effective state: `closed`, `open`, `half_open`, ...
    pub fn state(&mut self) -> String {
        let answer = self.ask(serde_json::json!({"cmd": "state"}));
        answer["state"].as_str().unwrap_or_default().to_owned()
    }

    /// The listener's events so far.
    pub fn events(&mut self) -> Vec<String> {
        let answer = self.ask(serde_json::json!({"cmd": "events"}));
        answer["events"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Kills the process (SIGKILL), as a crash or an OOM kill would: what
    /// it holds (a probe lease, queued writes) is never given back.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn label(&self) -> &str {
        &self.label
    }
}

impl Drop for Python {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            if let Some(mut stdin) = self.stdin.take() {
                let _ = stdin.write_all(b"{\"cmd\": \"quit\"}\n");
            }
            // A few seconds to drain and exit, then it is killed.
            let deadline = MonotonicClock.now().saturating_add(Duration::from_secs(5));
            while MonotonicClock.now() < deadline {
                if self.child.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::park_timeout(Duration::from_millis(20));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
