//! Real servers and real processes for the tests: each test starts its own
//! `redis-server` on a free loopback port (killed on drop), and runs the
//! built `interlock` binary with a deadline. Adapted from interlock-redis's
//! `tests/redis/support.rs` (single servers only).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use interlock::{Clock, MonotonicClock};

/// How long any one process or condition may take before the test fails.
pub const LIMIT: Duration = Duration::from_secs(30);

/// Waits (without `thread::sleep`) for `d` of real time.
pub fn pause(d: Duration) {
    let clock = MonotonicClock;
    let deadline = clock.now().saturating_add(d);
    loop {
        let now = clock.now();
        if now >= deadline {
            return;
        }
        std::thread::park_timeout(deadline.saturating_duration_since(now));
    }
}

/// Polls `cond` every few milliseconds until it holds or `limit` passes;
/// returns whether it held.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let clock = MonotonicClock;
    let deadline = clock.now().saturating_add(limit);
    loop {
        if cond() {
            return true;
        }
        if clock.now() >= deadline {
            return false;
        }
        pause(Duration::from_millis(5));
    }
}

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("local address").port()
}

fn temp_dir() -> PathBuf {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("interlock-cli-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir
}

/// One `redis-server` on its own port, killed on drop.
pub struct Server {
    port: u16,
    dir: PathBuf,
    child: Child,
}

impl Server {
    /// A fresh, empty `redis-server` without persistence.
    pub fn start() -> Server {
        let dir = temp_dir();
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            match spawn(port, &dir) {
                Ok(child) => return Server { port, dir, child },
                Err(e) => last_error = e,
            }
        }
        panic!("could not start redis-server: {last_error}");
    }

    /// Kills the server (SIGKILL) and starts an empty one on the same port.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = spawn(self.port, &self.dir).expect("restart on the same port");
    }

    /// Pauses (`STOP`) or resumes (`CONT`) the server process: paused, it
    /// still accepts connections (the kernel does) but answers nothing.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Kills the server (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("client")
    }

    /// A new admin connection (for setup and for changing keys behind the
    /// CLI's back).
    pub fn admin(&self) -> redis::Connection {
        let con = self
            .client()
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("admin connection");
        con.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        con
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts `redis-server` on `port` and waits for its PONG.
fn spawn(port: u16, dir: &std::path::Path) -> Result<Child, String> {
    let mut child = Command::new("redis-server")
        .arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start redis-server: {e} (scripts/test-all installs it)"))?;
    let url = format!("redis://127.0.0.1:{port}/");
    let up = eventually(Duration::from_secs(10), || {
        matches!(child.try_wait(), Ok(Some(_))) || ping(&url)
    });
    match child.try_wait() {
        Ok(None) if up => Ok(child),
        Ok(Some(status)) => Err(format!("exited with {status} on port {port}")),
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("no PONG on port {port} within 10 s"))
        }
    }
}

fn ping(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
        return false;
    };
    let _ = con.set_read_timeout(Some(Duration::from_millis(500)));
    redis::cmd("PING")
        .query::<String>(&mut con)
        .is_ok_and(|p| p == "PONG")
}

/// The `interlock` binary with no inherited Redis URL.
pub fn interlock() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_interlock"));
    cmd.env_remove("INTERLOCK_REDIS_URL");
    cmd
}

/// A finished process.
#[derive(Debug)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Asserts the exit code, showing both streams when it differs.
    pub fn expect_code(self, code: i32) -> Output {
        assert_eq!(self.code, Some(code), "{self:#?}");
        self
    }
}

/// Copies `stream` into `into` as it arrives (not line by line: a prompt
/// has no newline).
fn collect(mut stream: impl Read + Send + 'static, into: Arc<Mutex<Vec<u8>>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    })
}

/// A running `interlock` whose output is collected as it comes.
pub struct Running {
    child: Child,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
}

impl Running {
    /// Spawns `cmd` with its output piped (stdin as the caller set it).
    pub fn spawn(mut cmd: Command) -> Running {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run interlock");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let readers = vec![
            collect(child.stdout.take().expect("stdout"), stdout.clone()),
            collect(child.stderr.take().expect("stderr"), stderr.clone()),
        ];
        Running {
            child,
            stdout,
            stderr,
            readers,
        }
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Waits until stdout or stderr contains `needle`.
    pub fn wait_for(&self, needle: &str) {
        let seen = eventually(LIMIT, || {
            self.stdout().contains(needle) || self.stderr().contains(needle)
        });
        assert!(
            seen,
            "never printed {needle:?}\nstdout:\n{}\nstderr:\n{}",
            self.stdout(),
            self.stderr()
        );
    }

    /// Waits for the process to exit (killing it and failing after
    /// [`LIMIT`]) and returns what it printed.
    pub fn finish(mut self) -> Output {
        let mut status: Option<ExitStatus> = None;
        let exited = eventually(LIMIT, || {
            status = self.child.try_wait().expect("try_wait");
            status.is_some()
        });
        if !exited {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!(
                "interlock did not exit within {LIMIT:?}\nstdout:\n{}\nstderr:\n{}",
                self.stdout(),
                self.stderr()
            );
        }
        for reader in self.readers.drain(..) {
            reader.join().expect("reader thread");
        }
        Output {
            code: status.and_then(|s| s.code()),
            stdout: self.stdout(),
            stderr: self.stderr(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `cmd` to completion with stdin closed (not a terminal).
pub fn run(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null());
    Running::spawn(cmd).finish()
}

/// A pseudo-terminal: the child gets the terminal end as its stdin, the
/// test types into the controlling end.
pub struct Pty {
    controller: File,
    terminal: Option<File>,
}

impl Pty {
    pub fn open() -> Pty {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let controller = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
        grantpt(&controller).expect("grantpt");
        unlockpt(&controller).expect("unlockpt");
        let path = ptsname(&controller, Vec::new()).expect("ptsname");
        let terminal = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path.to_str().expect("a UTF-8 terminal path"))
            .expect("open the terminal end");
        Pty {
            controller: File::from(controller),
            terminal: Some(terminal),
        }
    }

    /// Spawns `cmd` with the terminal as its stdin.
    pub fn spawn(&mut self, mut cmd: Command) -> Running {
        let terminal = self.terminal.take().expect("one process per terminal");
        cmd.stdin(Stdio::from(terminal));
        Running::spawn(cmd)
    }

    /// Types `text` at the terminal.
    pub fn type_line(&mut self, text: &str) {
        self.controller
            .write_all(format!("{text}\n").as_bytes())
            .expect("type at the terminal");
        self.controller.flush().expect("flush");
    }
}
