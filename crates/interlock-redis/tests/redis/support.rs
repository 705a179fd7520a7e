//! Real servers for the tests: each test starts its own `redis-server` (or
//! `valkey-server`, or a 3-node cluster) on free loopback ports, with a
//! temporary directory and no persistence, and kills it on drop.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::{Clock, Event, MonotonicClock, Timestamp};

/// Waits (without `thread::sleep`) for `d` of real time.
pub fn pause(d: Duration) {
    let deadline = MonotonicClock.now().saturating_add(d);
    loop {
        let now = MonotonicClock.now();
        if now >= deadline {
            return;
        }
        std::thread::park_timeout(deadline.saturating_duration_since(now));
    }
}

/// Real time now, for measuring.
pub fn now() -> Timestamp {
    MonotonicClock.now()
}

/// Polls `cond` every few milliseconds until it holds or `limit` passes;
/// returns whether it held.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = now().saturating_add(limit);
    loop {
        if cond() {
            return true;
        }
        if now() >= deadline {
            return false;
        }
        pause(Duration::from_millis(5));
    }
}

/// Failures a loop that fails until a breaker trips may make: a breaker
/// that never trips then fails its test instead of hanging the run.
pub const TRIP_BUDGET: u32 = 10_000;

/// Counts one more failure of a loop that fails until a breaker trips
/// (`spent` starts at zero) and fails the test once [`TRIP_BUDGET`] is
/// spent.
pub fn spend_trip_budget(spent: &mut u32) {
    *spent += 1;
    assert!(
        *spent <= TRIP_BUDGET,
        "{TRIP_BUDGET} failures did not trip the breaker"
    );
}

/// Whether `binary` is an executable file on `PATH`.
pub fn on_path(binary: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(binary).is_file()))
}

/// A loopback port nobody listens on now (and, for cluster nodes, whose bus
/// port `+10000` is free too).
fn free_port(with_bus: bool) -> u16 {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("local address").port();
        if !with_bus {
            return port;
        }
        if port <= 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("interlock-redis-{tag}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir
}

/// One server process on its own port, killed on drop.
pub struct Server {
    binary: String,
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
    child: Option<Child>,
}

impl Server {
    /// A fresh `redis-server`.
    pub fn start() -> Server {
        Server::start_binary("redis-server", &[], false)
    }

    /// A fresh server of `binary` with `extra` arguments.
    pub fn start_binary(binary: &str, extra: &[&str], cluster: bool) -> Server {
        let dir = temp_dir(binary);
        let mut last_error = String::new();
        for _ in 0..5 {
            let mut server = Server {
                binary: binary.to_owned(),
                port: free_port(cluster),
                dir: dir.clone(),
                extra: extra.iter().map(|s| (*s).to_owned()).collect(),
                child: None,
            };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
        }
        panic!("could not start {binary}: {last_error}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut child = Command::new(&self.binary)
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn: {e} (is it installed? scripts/test-all installs it)"))?;
        let url = self.url();
        let up = eventually(Duration::from_secs(10), || {
            if let Ok(Some(_)) = child.try_wait() {
                return true; // exited: give up below
            }
            ping(&url)
        });
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited with {status} on port {}", self.port));
        }
        if !up {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("no PONG on port {} within 10 s", self.port));
        }
        self.child = Some(child);
        Ok(())
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("client")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new admin connection (for setup, fault injection and stats).
    pub fn admin(&self) -> redis::Connection {
        let con = self
            .client()
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("admin connection");
        con.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        con
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port (an empty data set, unless
    /// a dump was put in its directory).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn().expect("restart on the same port");
    }

    /// Sends `signal` (`STOP`, `CONT`) to the server process.
    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("a running server").id();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {pid} failed");
    }

    /// Pauses the process (SIGSTOP): connections stay open, nothing is
    /// answered, commands already sent run once it resumes.
    pub fn stop(&self) {
        self.signal("STOP");
    }

    /// Resumes a stopped process (SIGCONT).
    pub fn resume(&self) {
        self.signal("CONT");
    }

    /// Writes a snapshot (`SAVE`) and keeps a copy of it at `to`.
    pub fn dump_to(&self, to: &Path) {
        let _: () = redis::cmd("SAVE").query(&mut self.admin()).expect("SAVE");
        std::fs::copy(self.dir.join("dump.rdb"), to).expect("copy the dump");
    }

    /// Kills the server and starts it again from the snapshot at `from`.
    pub fn restart_from(&mut self, from: &Path) {
        self.kill();
        std::fs::copy(from, self.dir.join("dump.rdb")).expect("restore the dump");
        self.spawn().expect("restart from the dump");
    }

    /// Creates an ACL user with `rules` (e.g. `~interlock:*`, `+@all`) and
    /// returns a client that logs in as it.
    pub fn client_as(&self, user: &str, password: &str, rules: &[&str]) -> redis::Client {
        let mut acl = redis::cmd("ACL");
        acl.arg("SETUSER").arg(user).arg("reset").arg("on");
        acl.arg(format!(">{password}"));
        for rule in rules {
            acl.arg(*rule);
        }
        let _: () = acl.query(&mut self.admin()).expect("ACL SETUSER");
        redis::Client::open(format!(
            "redis://{user}:{password}@127.0.0.1:{}/",
            self.port
        ))
        .expect("client")
    }

    /// `INFO commandstats` as (command, calls) pairs.
    pub fn command_calls(&self) -> Vec<(String, u64)> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.admin())
            .expect("INFO commandstats");
        info.lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("cmdstat_")?;
                let (name, stats) = rest.split_once(':')?;
                let calls = stats.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
                Some((name.to_owned(), calls.parse().ok()?))
            })
            .collect()
    }

    /// Commands clients sent since the last `CONFIG RESETSTAT`: every call
    /// except the admin's own (`INFO`, `CONFIG`) and the commands scripts
    /// run inside `EVALSHA` (`HMGET`, `HSET`, `EXISTS`, `PEXPIRE`, `TIME`,
    /// `PUBLISH`, and the change index's sorted-set commands).
    pub fn client_commands(&self) -> Vec<(String, u64)> {
        const NOT_SENT: [&str; 14] = [
            "info",
            "config",
            "hmget",
            "hset",
            "exists",
            "pexpire",
            "pttl",
            "time",
            "publish",
            "zadd",
            "zrange",
            "zrangebyscore",
            "zremrangebyrank",
            "zremrangebyscore",
        ];
        self.command_calls()
            .into_iter()
            .filter(|(name, _)| {
                let base = name.split('|').next().unwrap_or(name);
                !NOT_SENT.contains(&base)
            })
            .collect()
    }

    /// How many clients are in subscriber mode (`CLIENT LIST TYPE pubsub`).
    pub fn pubsub_clients(&self) -> usize {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("pubsub")
            .query(&mut self.admin())
            .expect("CLIENT LIST");
        list.lines().filter(|l| !l.trim().is_empty()).count()
    }

    /// Kills every subscriber connection (`CLIENT KILL TYPE pubsub`);
    /// returns how many there were.
    pub fn kill_pubsub_clients(&self) -> u64 {
        redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query(&mut self.admin())
            .expect("CLIENT KILL")
    }

    /// Calls of one command since the last `CONFIG RESETSTAT` (0 if none).
    pub fn calls_of(&self, command: &str) -> u64 {
        self.command_calls()
            .into_iter()
            .find(|(name, _)| name == command)
            .map_or(0, |(_, calls)| calls)
    }

    pub fn reset_stats(&self) {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut self.admin())
            .expect("CONFIG RESETSTAT");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
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

/// Three `redis-server --cluster-enabled yes` nodes joined into one
/// cluster with `redis-cli --cluster create`, killed on drop.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let nodes: Vec<Server> = (0..3)
            .map(|i| {
                let conf = format!("nodes-{i}.conf");
                Server::start_binary(
                    "redis-server",
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        &conf,
                        "--cluster-node-timeout",
                        "5000",
                    ],
                    true,
                )
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let ok = eventually(Duration::from_secs(20), || {
            nodes.iter().all(|n| {
                redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query::<String>(&mut n.admin())
                    .is_ok_and(|info| info.contains("cluster_state:ok"))
            })
        });
        assert!(ok, "the cluster never reached cluster_state:ok");
        Cluster { nodes }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Server::url).collect()
    }
}

/// What a [`NoticeSink`](interlock::storage::NoticeSink) received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    Resync,
    Changed(String, u64),
}

/// A notice handler that records what it receives, standing in for a
/// coordinator; dropping it is the coordinator going away.
pub struct Inbox {
    handler: Arc<interlock::storage::NoticeHandler>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Inbox {
    pub fn new() -> Inbox {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let handler: Arc<interlock::storage::NoticeHandler> =
            Arc::new(move |n: interlock::storage::Notice<'_>| {
                let item = match n {
                    interlock::storage::Notice::Changed { name, version } => {
                        Seen::Changed(name.to_owned(), version)
                    }
                    // The record itself: recorded by its version here, its
                    // contents checked in notices.rs.
                    interlock::storage::Notice::Written { name, state } => {
                        Seen::Changed(name.to_owned(), state.version)
                    }
                    interlock::storage::Notice::Resync => Seen::Resync,
                    _ => return,
                };
                log.lock().unwrap().push(item);
            });
        Inbox { handler, seen }
    }

    pub fn sink(&self) -> interlock::storage::NoticeSink {
        interlock::storage::NoticeSink::new(&self.handler)
    }

    pub fn all(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn resyncs(&self) -> usize {
        self.all().iter().filter(|s| **s == Seen::Resync).count()
    }

    /// The `Changed` notices received, in order.
    pub fn changes(&self) -> Vec<(String, u64)> {
        self.all()
            .into_iter()
            .filter_map(|s| match s {
                Seen::Changed(name, version) => Some((name, version)),
                Seen::Resync => None,
            })
            .collect()
    }

    /// Waits (up to 5 s) until a `Changed` notice for `name` arrived.
    pub fn wait_for(&self, name: &str) -> bool {
        eventually(Duration::from_secs(5), || {
            self.changes().iter().any(|(n, _)| n == name)
        })
    }
}

/// Breaker events as text (call records left out), shared with a listener.
#[derive(Clone, Default)]
pub struct Events(Arc<Mutex<Vec<String>>>);

impl Events {
    pub fn listener(&self) -> impl Fn(&Event<'_>) + Send + Sync + 'static {
        let log = self.0.clone();
        move |e: &Event<'_>| {
            if !matches!(e, Event::CallRecorded { .. } | Event::CallRejected { .. }) {
                log.lock().unwrap().push(e.to_string());
            }
        }
    }

    pub fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    pub fn count(&self, needle: &str) -> usize {
        self.all().iter().filter(|e| e.contains(needle)).count()
    }
}
