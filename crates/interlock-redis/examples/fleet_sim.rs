//! A fleet simulator (issue 29): N instances (threads, each with its own
//! storage, so its own connections and notice subscription, its own
//! coordinator and M breakers) against a real `redis-server` this program
//! starts on a free loopback port and kills at the end, while a writer
//! changes a given fraction of the breakers per second. For each polling
//! mode it reports the server's CPU (`INFO cpu`: `used_cpu_sys` +
//! `used_cpu_user`) per instance-poll, the commands per poll (`INFO
//! commandstats`), and how long a change took to reach every instance
//! (p50, p99, max).
//!
//! ```sh
//! cargo run --release -p interlock-redis --example fleet_sim -- \
//!     --instances 50 --breakers 1000 --change-rate 0.01 --seconds 20 --rounds 3
//! ```
//!
//! Options (defaults in brackets): `--instances` [50], `--breakers` [1000],
//! `--change-rate` [0.01] (changes per breaker per second: a change is a
//! trip of a CLOSED breaker, or the close that follows it `--hold-ms`
//! [500] later), `--seconds` [30] per measured window, `--rounds` [3],
//! `--poll-ms` [1000], `--notices` [on|off], `--modes` [full,index]
//! (`full`: the change index off, every poll reads every breaker; `index`:
//! the default).
//!
//! Method. Each mode builds one fleet, waits until every instance has
//! polled three times (counted when answered), starts the writer, and then
//! measures `rounds` pairs of windows of `--seconds` each: polls **off**
//! (the coordinators still poll, but the storage answers in the process,
//! every request left unanswered, so nothing reaches the server: the
//! window holds only the writes, their notices to every subscriber and
//! the server's housekeeping), then polls **on**. Each window starts after
//! a settling time of two poll intervals, so polls in flight at a switch
//! and each instance's first poll after one (which catches up with the
//! window before) are not counted. What the polls cost is the difference
//! of the two windows of a pair, on the same fleet and the same writer, so
//! no second fleet's noise is subtracted; the median of the rounds is
//! reported.
//!
//! Per round it prints the server's CPU (`INFO cpu`: `used_cpu_sys` +
//! `used_cpu_user`) in both windows, and per instance-poll of the on
//! window: `cpu us/poll`, the CPU above the off window; `script us/poll`,
//! the `EVALSHA` time of `INFO commandstats` above the off window's
//! (scaled to the writes; the scripts alone, in wall time, without the
//! request around them); the commands each poll sent (`evalsha`) and ran
//! inside its script (`hmget`: hashes read; `zset`: index lookups), both
//! above the off window's. Propagation (p50, p99, max) is from each write
//! in an on window to the moment each instance's cached view has its
//! version; a change no instance saw within 10 s counts as missed.
//!
//! Before the fleet, a probe (`--probe` [2000] polls, 0 to skip) measures
//! one poll alone on the server: one storage polls every breaker (all of
//! them written, so every hash exists), with the index from the same epoch
//! each time, after which the changes one poll interval brings at the
//! change rate were written (so the loop writes nothing and every poll
//! finds exactly those): read (`ReadIfChanged`, an instance that missed
//! their notices) and vouched for (`ReadUnlessAt` the version written, an
//! instance whose notices brought them). The full read is probed with a
//! tenth of the polls. The probe's storage has notices off, so its polls
//! always run the `changes` script; the fleet's instances subscribe, so a
//! poll whose notices brought every change since its cursor runs the short
//! `confirm` instead (issue 29, see `docs/coordination.md`).
#![allow(clippy::print_stdout, clippy::print_stderr)]
// a command-line tool
// A measurement on a real server in real time: wall time and sleeps are its job.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use interlock::mode::Blocking;
use interlock::storage::{
    ChangePoll, Coordinator, Epoch, NoticeSink, PollAnswers, PollRequest, ProbeLease, SharedState,
    Storage, StorageError, StorageSettings,
};
use interlock::{CircuitBreaker, Config, Outcome};
use interlock_redis::RedisStorage;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What to simulate.
#[derive(Clone, Debug)]
struct Args {
    instances: usize,
    breakers: usize,
    change_rate: f64,
    hold: Duration,
    seconds: u64,
    poll: Duration,
    notices: bool,
    modes: Vec<String>,
    probe: usize,
    rounds: usize,
}

fn parse_args() -> Result<Args, Error> {
    let mut a = Args {
        instances: 50,
        breakers: 1000,
        change_rate: 0.01,
        hold: Duration::from_millis(500),
        seconds: 30,
        poll: Duration::from_millis(1000),
        notices: true,
        modes: vec!["full".into(), "index".into()],
        probe: 2000,
        rounds: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--instances" => a.instances = value.parse()?,
            "--breakers" => a.breakers = value.parse()?,
            "--change-rate" => a.change_rate = value.parse()?,
            "--hold-ms" => a.hold = Duration::from_millis(value.parse()?),
            "--seconds" => a.seconds = value.parse()?,
            "--poll-ms" => a.poll = Duration::from_millis(value.parse()?),
            "--notices" => a.notices = value == "on",
            "--modes" => a.modes = value.split(',').map(str::to_owned).collect(),
            "--probe" => a.probe = value.parse()?,
            "--rounds" => a.rounds = value.parse::<usize>()?.max(1),
            _ => return Err(format!("unknown option {flag}").into()),
        }
    }
    Ok(a)
}

/// A `redis-server` of our own, killed on drop.
struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Server {
    fn start() -> Result<Server, Error> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = std::env::temp_dir().join(format!("interlock-fleet-sim-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--maxclients", "10000"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start redis-server: {e}"))?;
        let server = Server { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.admin().is_err() {
            if Instant::now() > deadline {
                return Err("redis-server did not answer within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    fn client(&self) -> redis::Client {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).expect("a valid URL")
    }

    fn admin(&self) -> redis::RedisResult<redis::Connection> {
        self.client().get_connection()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The server's CPU seconds so far (`used_cpu_sys + used_cpu_user`).
fn server_cpu(con: &mut redis::Connection) -> Result<f64, Error> {
    let info: String = redis::cmd("INFO").arg("cpu").query(con)?;
    let field = |name: &str| -> f64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
            .unwrap_or(0.0)
    };
    Ok(field("used_cpu_sys") + field("used_cpu_user"))
}

/// `INFO commandstats`: calls per command, and `<command>.usec`: the
/// microseconds spent in it.
fn command_calls(con: &mut redis::Connection) -> Result<HashMap<String, u64>, Error> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con)?;
    let mut out = HashMap::new();
    for line in info.lines() {
        let Some((name, stats)) = line
            .strip_prefix("cmdstat_")
            .and_then(|rest| rest.split_once(':'))
        else {
            continue;
        };
        for (field, key) in [
            ("calls=", name.to_owned()),
            ("usec=", format!("{name}.usec")),
        ] {
            if let Some(v) = stats.split(',').find_map(|kv| kv.strip_prefix(field))
                && let Ok(v) = v.parse()
            {
                out.insert(key, v);
            }
        }
    }
    Ok(out)
}

/// A storage that counts the coordinator's batched polls and delegates
/// everything to the Redis storage.
struct Counting {
    inner: RedisStorage<redis::Connection>,
    polls: Arc<AtomicU64>,
    /// Off: a poll is answered here, every request left unanswered (as if
    /// nothing changed), and nothing reaches the server: the baseline
    /// windows of the same fleet.
    on: Arc<AtomicBool>,
}

impl Storage for Counting {
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        self.inner.read(name)
    }
    fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.inner.trip_open(name, ttl, expected)
    }
    fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.inner
            .begin_half_open_if_elapsed(name, wait, permitted, ttl)
    }
    fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        self.inner.lease_probe(name, ttl)
    }
    fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.inner.record_probe(name, outcome, ttl)
    }
    fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.inner.close(name, ttl, expected)
    }
    fn restart_stalled_round(
        &self,
        name: &str,
        expected: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.inner
            .restart_stalled_round(name, expected, permitted, ttl)
    }
    fn restore(
        &self,
        name: &str,
        expected: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.inner.restore(name, expected, state, ttl)
    }
    // Counted once answered: a warm-up that waits for polls waits for
    // their scripts to finish too.
    fn poll_many(&self, requests: &[PollRequest<'_>]) -> Result<PollAnswers, StorageError> {
        let answers = self.inner.poll_many(requests);
        self.polls.fetch_add(1, Ordering::Relaxed);
        answers
    }
    fn poll_changes(
        &self,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> Result<ChangePoll, StorageError> {
        if !self.on.load(Ordering::Relaxed) {
            return Ok(ChangePoll {
                epoch: since,
                answers: requests.iter().map(|_| None).collect(),
            });
        }
        let poll = self.inner.poll_changes(since, requests);
        self.polls.fetch_add(1, Ordering::Relaxed);
        poll
    }
    fn subscribe(&self, sink: NoticeSink) -> bool {
        self.inner.subscribe(sink)
    }
    fn settings(&self) -> StorageSettings {
        self.inner.settings()
    }
}

/// One simulated process.
struct Instance {
    _lane: Coordinator<Blocking>,
    breakers: Vec<CircuitBreaker<Blocking>>,
}

/// A change the writer made: which breaker, the version it wrote, when.
struct Change {
    breaker: usize,
    version: u64,
    at: Instant,
    /// Which instances have not seen it yet.
    unseen: Vec<usize>,
    /// The window it was written in (even: polls off, odd: on).
    window: usize,
}

/// xorshift64*: enough randomness to pick breakers, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        usize::try_from(x % u64::try_from(n).unwrap_or(1)).unwrap_or(0)
    }
}

/// What one window of a mode measured.
#[derive(Default)]
struct Window {
    polls: u64,
    cpu_s: f64,
    calls: HashMap<String, u64>,
    writes: u64,
}

/// What one mode measured: its windows, alternately polls off and on, and
/// the propagation of the changes written in the windows with polls on.
struct Report {
    windows: Vec<Window>,
    latencies: Vec<Duration>,
    missed: usize,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// The server's counters at one instant.
struct Mark {
    cpu: f64,
    calls: HashMap<String, u64>,
    polls: u64,
    writes: u64,
}

/// One fleet in `mode` (`full`: the change index off; `index`: on), its
/// writer running throughout, measured in `2 × rounds` windows of
/// `seconds`: polls off (answered in the process, so the window is the
/// fleet's baseline: writes, notices, housekeeping), then on, and so on.
fn run(server: &Server, args: &Args, mode: &str) -> Result<Report, Error> {
    let index = mode == "index";
    let mut admin = server.admin()?;
    let _: () = redis::cmd("FLUSHALL").query(&mut admin)?;
    let ttl = Duration::from_secs(300);
    let polls = Arc::new(AtomicU64::new(0));
    let on = Arc::new(AtomicBool::new(true));
    let names: Vec<String> = (0..args.breakers).map(|i| format!("host-{i}")).collect();
    let config = Config::builder()
        .wait_duration_in_open(Duration::from_secs(30))
        .build()?;
    let mut instances = Vec::with_capacity(args.instances);
    for _ in 0..args.instances {
        let storage = RedisStorage::from_client(server.client(), Duration::from_secs(2))
            .poll_interval(args.poll)
            .state_ttl(ttl)
            .notifications(args.notices)
            .change_index(index)
            .build()?;
        let lane = Coordinator::blocking(Counting {
            inner: storage,
            polls: polls.clone(),
            on: on.clone(),
        });
        let breakers = names
            .iter()
            .map(|name| {
                CircuitBreaker::builder(name.as_str())
                    .config(config.clone())
                    .coordinator(&lane)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        instances.push(Instance {
            _lane: lane,
            breakers,
        });
    }
    // Warm-up: every instance has polled a few times (scripts loaded,
    // connections open, the first full polls done).
    let n = u64::try_from(args.instances)?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while polls.load(Ordering::Relaxed) < 3 * n {
        if Instant::now() > deadline {
            return Err("the instances did not poll within 2 minutes".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    let pending: Arc<Mutex<Vec<Change>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let window_no = Arc::new(AtomicU64::new(0));
    let writer = {
        let (pending, stop, writes, window_no) = (
            pending.clone(),
            stop.clone(),
            writes.clone(),
            window_no.clone(),
        );
        let storage = RedisStorage::from_client(server.client(), Duration::from_secs(2))
            .notifications(args.notices)
            .change_index(index)
            .build()?;
        let (names, args) = (names.clone(), args.clone());
        std::thread::spawn(move || -> Result<(), StorageError> {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
            let mut open: Vec<(usize, Instant)> = Vec::new();
            let mut owed = 0.0;
            let tick = Duration::from_millis(10);
            let per_tick = args.change_rate * names.len() as f64 * tick.as_secs_f64();
            let everyone: Vec<usize> = (0..args.instances).collect();
            let record = |breaker: usize, version: u64| {
                writes.fetch_add(1, Ordering::Relaxed);
                pending.lock().expect("not poisoned").push(Change {
                    breaker,
                    version,
                    at: Instant::now(),
                    unseen: everyone.clone(),
                    window: usize::try_from(window_no.load(Ordering::Relaxed)).unwrap_or(0),
                });
            };
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                next += tick;
                // Closes that are due: each is the second change of a trip.
                let now = Instant::now();
                let due: Vec<usize> = open
                    .iter()
                    .filter(|(_, at)| now >= *at)
                    .map(|(b, _)| *b)
                    .collect();
                open.retain(|(_, at)| now < *at);
                for b in due {
                    let v = storage.close(&names[b], ttl, None)?;
                    owed -= 1.0;
                    record(b, v.version);
                }
                owed += per_tick;
                while owed >= 1.0 {
                    let b = rng.below(names.len());
                    if open.iter().any(|(o, _)| *o == b) {
                        continue;
                    }
                    let v = storage.trip_open(&names[b], ttl, None)?;
                    owed -= 1.0;
                    open.push((b, Instant::now() + args.hold));
                    record(b, v.version);
                }
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            Ok(())
        })
    };

    let mark = |admin: &mut redis::Connection| -> Result<Mark, Error> {
        Ok(Mark {
            cpu: server_cpu(admin)?,
            calls: command_calls(admin)?,
            polls: polls.load(Ordering::Relaxed),
            writes: writes.load(Ordering::Relaxed),
        })
    };
    let window = Duration::from_secs(args.seconds);
    let count = 2 * args.rounds;
    let mut windows = Vec::with_capacity(count);
    let mut latencies = Vec::new();
    let mut missed = 0;
    // Each window begins after a settling time of two poll intervals (and
    // at least a second): after a switch off, polls in flight end; after a
    // switch on, each instance's first poll catches up with the window
    // before (its view of what changed there was answered in the process,
    // so the poll reads it), and that transient is not what a fleet that
    // always polls costs.
    let settle = (2 * args.poll).max(Duration::from_secs(1));
    on.store(false, Ordering::Relaxed);
    let mut current = 0;
    let mut start = Instant::now() + settle;
    let mut from: Option<Mark> = None;
    loop {
        let now = Instant::now();
        if current < count && from.is_none() && now >= start {
            from = Some(mark(&mut admin)?);
        }
        if current < count
            && let Some(from) = from.take_if(|_| now.duration_since(start) >= window)
        {
            let to = mark(&mut admin)?;
            let calls = to
                .calls
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.saturating_sub(from.calls.get(k).copied().unwrap_or(0)),
                    )
                })
                .collect();
            windows.push(Window {
                polls: to.polls - from.polls,
                cpu_s: to.cpu - from.cpu,
                calls,
                writes: to.writes - from.writes,
            });
            current += 1;
            window_no.store(u64::try_from(current)?, Ordering::Relaxed);
            if current == count {
                stop.store(true, Ordering::Relaxed);
            } else {
                on.store(current % 2 == 1, Ordering::Relaxed);
                start = Instant::now() + settle;
            }
        }
        {
            let mut pending = pending.lock().expect("not poisoned");
            for change in pending.iter_mut() {
                change.unseen.retain(|&i| {
                    let seen = instances[i].breakers[change.breaker]
                        .shared_view()
                        .is_some_and(|v| v.version >= change.version);
                    if seen && change.window % 2 == 1 {
                        latencies.push(now.duration_since(change.at));
                    }
                    !seen
                });
            }
            pending.retain(|c| {
                let lost = now.duration_since(c.at) > Duration::from_secs(10);
                if lost {
                    missed += c.unseen.len();
                }
                !c.unseen.is_empty() && !lost
            });
            if current == count && pending.is_empty() {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    writer.join().map_err(|_| "the writer panicked")??;
    latencies.sort_unstable();
    Ok(Report {
        windows,
        latencies,
        missed,
    })
}

/// The server CPU of one poll, alone on the server: `polls` polls of
/// `breakers` existing hashes by one storage. With the index, every poll
/// asks from the same epoch, after which `changes` records were written:
/// so each poll finds exactly those changes, and the loop itself writes
/// nothing. With `vouch`, the poll asks for the changed ones as an
/// instance that adopted their notices does (`ReadUnlessAt` the version
/// written: vouched for, not read); without, as one that did not
/// (`ReadIfChanged`: read). Returns microseconds per poll.
fn probe(
    server: &Server,
    breakers: usize,
    index: bool,
    changes: usize,
    vouch: bool,
    polls: usize,
) -> Result<f64, Error> {
    let mut admin = server.admin()?;
    let _: () = redis::cmd("FLUSHALL").query(&mut admin)?;
    let ttl = Duration::from_secs(300);
    let s = RedisStorage::from_client(server.client(), Duration::from_secs(2))
        .notifications(false)
        .change_index(index)
        .build()?;
    let names: Vec<String> = (0..breakers).map(|i| format!("host-{i}")).collect();
    for name in &names {
        s.close(name, ttl, None)?;
    }
    let reads: Vec<PollRequest<'_>> = names
        .iter()
        .map(|name| PollRequest::Read { name })
        .collect();
    let epoch = s.poll_changes(None, &reads)?.epoch;
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut written = HashMap::new();
    for _ in 0..changes {
        let b = rng.below(names.len());
        written.insert(b, s.close(&names[b], ttl, None)?.version);
    }
    let ifs: Vec<PollRequest<'_>> = names
        .iter()
        .enumerate()
        .map(|(i, name)| match written.get(&i) {
            Some(&version) if vouch => PollRequest::ReadUnlessAt { name, version },
            _ => PollRequest::ReadIfChanged { name },
        })
        .collect();
    let requests = if epoch.is_some() { &ifs } else { &reads };
    let cpu0 = server_cpu(&mut admin)?;
    for _ in 0..polls {
        let poll = s.poll_changes(epoch, requests)?;
        if index && poll.unanswered() + written.len() < breakers {
            return Err("the probe's poll read more than the changes".into());
        }
        if index && vouch && poll.unanswered() < breakers {
            return Err("the probe's poll read a breaker it could vouch for".into());
        }
    }
    let cpu = server_cpu(&mut admin)? - cpu0;
    #[allow(clippy::cast_precision_loss)]
    Ok(cpu * 1e6 / polls as f64)
}

fn main() -> Result<(), Error> {
    let args = parse_args()?;
    let server = Server::start()?;
    println!(
        "fleet: {} instances x {} breakers, {} changes per breaker per second (hold {} ms), \
         poll every {} ms, notices {}, {} rounds of two {} s windows (polls off, on) per mode",
        args.instances,
        args.breakers,
        args.change_rate,
        args.hold.as_millis(),
        args.poll.as_millis(),
        if args.notices { "on" } else { "off" },
        args.rounds,
        args.seconds
    );
    let mut full_probe = None;
    if args.probe > 0 {
        let changes = (args.change_rate * args.breakers as f64 * args.poll.as_secs_f64()).round();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let changes = changes as usize;
        let full = probe(
            &server,
            args.breakers,
            false,
            changes,
            false,
            args.probe / 10,
        )?;
        let idle = probe(&server, args.breakers, true, 0, false, args.probe)?;
        let changed = probe(&server, args.breakers, true, changes, false, args.probe)?;
        let vouched = probe(&server, args.breakers, true, changes, true, args.probe)?;
        println!(
            "probe ({} polls alone on the server, {} existing breakers): server CPU per poll: \
             full read {full:.1} us; change poll {idle:.1} us idle, after {changes} changes \
             {changed:.1} us read (1/{:.0} of the full read), {vouched:.1} us vouched for \
             (1/{:.0})",
            args.probe,
            args.breakers,
            full / changed.max(0.001),
            full / vouched.max(0.001)
        );
        full_probe = Some(full);
    }
    println!(
        "{:<6} {:>5} {:>6} {:>6} {:>9} {:>9} {:>11} {:>14} {:>12} {:>10} {:>9}",
        "mode",
        "round",
        "polls",
        "writes",
        "off cpu",
        "on cpu",
        "cpu us/poll",
        "script us/poll",
        "evalsha/poll",
        "hmget/poll",
        "zset/poll"
    );
    let mut fleet_full = None;
    for mode in &args.modes {
        if !["full", "index"].contains(&mode.as_str()) {
            return Err(format!("unknown mode {mode}").into());
        }
        let r = run(&server, &args, mode)?;
        let mut per_poll = Vec::new();
        for (round, pair) in r.windows.chunks(2).enumerate() {
            let [off, on] = pair else { continue };
            #[allow(clippy::cast_precision_loss)]
            let polls = on.polls.max(1) as f64;
            #[allow(clippy::cast_precision_loss)]
            let get = |w: &Window, k: &str| w.calls.get(k).copied().unwrap_or(0) as f64;
            // The writes' own script time and hash reads, from the window
            // without polls, scaled to this window's writes.
            #[allow(clippy::cast_precision_loss)]
            let scale = on.writes as f64 / (off.writes.max(1) as f64);
            let above = |k: &str| (get(on, k) - get(off, k) * scale).max(0.0) / polls;
            let zset: f64 = [
                "zadd",
                "zrange",
                "zrangebyscore",
                "zremrangebyrank",
                "zremrangebyscore",
            ]
            .iter()
            .map(|k| above(k))
            .sum();
            let cpu = (on.cpu_s - off.cpu_s) * 1e6 / polls;
            per_poll.push(cpu);
            println!(
                "{:<6} {:>5} {:>6} {:>6} {:>7.0}ms {:>7.0}ms {:>11.1} {:>14.1} {:>12.2} {:>10.2} {:>9.2}",
                mode,
                round + 1,
                on.polls,
                on.writes,
                off.cpu_s * 1e3,
                on.cpu_s * 1e3,
                cpu,
                above("evalsha.usec"),
                above("evalsha"),
                above("hmget"),
                zset,
            );
        }
        per_poll.sort_by(f64::total_cmp);
        let median = per_poll.get(per_poll.len() / 2).copied().unwrap_or(0.0);
        println!(
            "{mode}: median server CPU per instance-poll {median:.1} us; propagation of the \
             changes written with polls on: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, {} \
             observed, {} missed",
            percentile(&r.latencies, 0.5).as_secs_f64() * 1e3,
            percentile(&r.latencies, 0.99).as_secs_f64() * 1e3,
            percentile(&r.latencies, 1.0).as_secs_f64() * 1e3,
            r.latencies.len(),
            r.missed
        );
        if mode == "full" {
            fleet_full = Some(median);
        }
        if mode == "index" {
            let ratio = |full: Option<f64>| {
                full.map_or_else(
                    || "-".to_owned(),
                    |f| format!("1/{:.0}", f / median.max(0.001)),
                )
            };
            println!(
                "index: {} of the probe's full read, {} of the fleet's full-read poll",
                ratio(full_probe),
                ratio(fleet_full)
            );
        }
    }
    Ok(())
}
