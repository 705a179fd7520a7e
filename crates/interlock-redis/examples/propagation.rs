//! Measures the two figures of the performance page's "Fleet propagation"
//! section against a real Redis:
//!
//! 1. **Trip-to-rejection latency** across three instances, each its own
//!    process (this example starts two copies of itself as followers): the
//!    time from instance A's local trip until instance B (and C) rejects a
//!    call, over `TRIPS` trips (default 200), with `poll_interval` 1 s,
//!    once with change notices on and once with them off. With notices on
//!    it also splits each sample in three: from the trip until the notice
//!    reaches the follower process (timed by a plain subscriber of its
//!    own), from there until the follower's breaker adopts the OPEN (its
//!    state-change event), and from there until a call is rejected.
//! 2. **Redis commands per poll interval** for 100 breakers on one storage,
//!    from `INFO commandstats` over ten poll intervals, batched polling on
//!    and off.
//!
//! It resets the server's command statistics (`CONFIG RESETSTAT`): point it
//! at a server of its own.
//!
//! ```text
//! redis-server --port 6390 --save '' --appendonly no &
//! REDIS_URL=redis://127.0.0.1:6390/ cargo run --release -p interlock-redis --example propagation
//! ```
#![allow(clippy::print_stdout)] // a measurement prints its figures

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use interlock::storage::Coordinator;
use interlock::{CircuitBreaker, Clock, Config, Event, MonotonicClock, SlidingWindow, State};
use interlock_redis::RedisStorage;

type Error = Box<dyn std::error::Error + Send + Sync>;

const POLL: Duration = Duration::from_secs(1);
/// How long a follower waits for a trip before it reports a miss.
const GIVE_UP: Duration = Duration::from_secs(10);
/// Failures a trip may take before the run gives up (a breaker that never
/// trips ends it with an error, not a hang).
const MAX_FAILURES: u32 = 10_000;

/// Wall-clock nanoseconds since the Unix epoch: the one clock the three
/// processes share, for timing a trip in one and a rejection in another.
#[allow(clippy::disallowed_methods)] // a measurement across processes needs wall time
fn wall_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Waits `d` of real time without `thread::sleep`.
fn pause(d: Duration) {
    let deadline = MonotonicClock.now().saturating_add(d);
    loop {
        let now = MonotonicClock.now();
        if now >= deadline {
            return;
        }
        std::thread::park_timeout(deadline.saturating_duration_since(now));
    }
}

fn storage(
    url: &str,
    prefix: &str,
    push: bool,
    batched: bool,
) -> Result<RedisStorage<redis::Connection>, Error> {
    Ok(
        RedisStorage::from_client(redis::Client::open(url)?, Duration::from_secs(1))
            .key_prefix(prefix)
            .poll_interval(POLL)
            .notifications(push)
            .batched_polling(batched)
            .build()?,
    )
}

/// Trips at the first failure and stays open for the whole run.
fn config() -> Result<Config, Error> {
    Ok(Config::builder()
        .minimum_number_of_calls(1)
        .sliding_window(SlidingWindow::count(1))
        .wait_duration_in_open(Duration::from_secs(3600))
        .build()?)
}

fn admin(url: &str) -> Result<redis::Connection, Error> {
    Ok(redis::Client::open(url)?.get_connection_with_timeout(Duration::from_secs(2))?)
}

fn pubsub_clients(url: &str) -> Result<usize, Error> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut admin(url)?)?;
    Ok(list.lines().filter(|l| !l.trim().is_empty()).count())
}

/// A follower process: one storage, one coordinator serving the breakers
/// `trip-0` .. `trip-{trips - 1}`, built up front so the coordinator polls
/// them on its own cadence; for each `watch NAME` on stdin it says `ready
/// NAME`, calls that breaker every 100 µs until a call is rejected, prints
/// `rejected NAME WALL_NS` and closes the breaker.
fn follower(url: &str, prefix: &str, push: bool, trips: usize) -> Result<(), Error> {
    let lane = Coordinator::blocking(storage(url, prefix, push, true)?);
    let adopted = Stamps::default();
    let mut breakers = (0..trips)
        .map(|i| {
            let stamps = adopted.clone();
            CircuitBreaker::builder(format!("trip-{i}"))
                .config(config()?)
                .coordinator(&lane)
                .listener(move |e: &Event<'_>| {
                    if let Event::StateChanged {
                        breaker,
                        to: State::Open,
                        ..
                    } = e
                    {
                        stamps.stamp(breaker);
                    }
                })
                .build()
                .map_err(Error::from)
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let noticed = Stamps::default();
    if push {
        listen(url, prefix, noticed.clone())?;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "up")?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let Some(name) = line.strip_prefix("watch ") else {
            continue;
        };
        let Some(at) = breakers.iter().position(|b| b.name() == name) else {
            writeln!(out, "missed {name}")?;
            continue;
        };
        let breaker = breakers.swap_remove(at);
        writeln!(out, "ready {name}")?;
        out.flush()?;
        let deadline = MonotonicClock.now().saturating_add(GIVE_UP);
        loop {
            if breaker
                .call(|| Ok::<_, std::io::Error>(()))
                .is_err_and(|e| e.is_rejected())
            {
                let rejected = wall_ns();
                writeln!(
                    out,
                    "rejected {name} {rejected} {} {}",
                    noticed.get(name),
                    adopted.get(name)
                )?;
                break;
            }
            if MonotonicClock.now() >= deadline {
                writeln!(
                    out,
                    "missed {name}: state {}, shared view {:?}, degraded {}",
                    breaker.state(),
                    breaker.shared_view(),
                    breaker.is_degraded()
                )?;
                break;
            }
            std::thread::park_timeout(Duration::from_micros(100));
        }
        out.flush()?;
        breaker.close();
    }
    Ok(())
}

/// When each breaker's moment came (wall-clock nanoseconds), by name: the
/// first stamp counts.
#[derive(Clone, Default)]
struct Stamps(Arc<Mutex<HashMap<String, u128>>>);

impl Stamps {
    fn stamp(&self, name: &str) {
        let at = wall_ns();
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.entry(name.to_owned()).or_insert(at);
    }

    fn get(&self, name: &str) -> u128 {
        let map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(name).copied().unwrap_or(0)
    }
}

/// A plain subscriber of the follower's own, on a thread of its own:
/// stamps when each breaker's first change notice reaches this process.
fn listen(url: &str, prefix: &str, noticed: Stamps) -> Result<(), Error> {
    let mut con = redis::Client::open(url)?.get_connection()?;
    let channel = format!("{prefix}notices");
    let prefix = prefix.to_owned();
    std::thread::spawn(move || {
        let mut pubsub = con.as_pubsub();
        if pubsub.subscribe(&channel).is_err() {
            return;
        }
        while let Ok(msg) = pubsub.get_message() {
            let payload: String = msg.get_payload().unwrap_or_default();
            // `<version> <key>`, then (since issue 21) a newline and the
            // record.
            let head = payload.split('\n').next().unwrap_or_default();
            if let Some(name) = head
                .split_once(' ')
                .and_then(|(_, key)| key.strip_prefix(&prefix))
            {
                noticed.stamp(name);
            }
        }
    });
    Ok(())
}

/// A sample: the whole trip-to-rejection latency, and, with notices, its
/// parts.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    total: Duration,
    to_notice: Option<Duration>,
    /// From the trip until the follower adopted the OPEN (the coordinator's
    /// own subscriber may beat the timing one, so this is not the sum of
    /// the two parts around it).
    to_adopted: Option<Duration>,
    to_adopt: Option<Duration>,
    to_reject: Option<Duration>,
}

struct Follower {
    child: Child,
    stdin: ChildStdin,
}

/// One latency run: two follower processes, this process as instance A.
fn latency(url: &str, prefix: &str, push: bool, trips: usize) -> Result<Vec<Sample>, Error> {
    let exe = std::env::current_exe()?;
    let (lines, inbox) = mpsc::channel::<(usize, String)>();
    let mut followers = Vec::new();
    for id in 0..2 {
        let mut child = Command::new(&exe)
            .args(["follower", if push { "on" } else { "off" }, prefix])
            .arg(trips.to_string())
            .env("REDIS_URL", url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines.send((id, line)).is_err() {
                    return;
                }
            }
        });
        followers.push(Follower { child, stdin });
    }
    let expect = |what: &str| -> Result<Vec<String>, Error> {
        let mut got = Vec::new();
        while got.len() < 2 {
            let (_, line) = inbox.recv_timeout(GIVE_UP * 2)?;
            if line.starts_with(what) {
                got.push(line);
            } else if line.starts_with("missed") {
                return Err(format!("a follower missed a trip: {line}").into());
            }
        }
        Ok(got)
    };
    expect("up")?;
    let lane = Coordinator::blocking(storage(url, prefix, push, true)?);
    let _first = CircuitBreaker::builder("leader-up")
        .coordinator(&lane)
        .build()?;
    // With notices: each follower's coordinator and its timing subscriber,
    // and this process's coordinator.
    let subscriptions = if push { 5 } else { 0 };
    let deadline = MonotonicClock.now().saturating_add(Duration::from_secs(10));
    while pubsub_clients(url)? != subscriptions {
        if MonotonicClock.now() >= deadline {
            return Err(format!("expected {subscriptions} subscriptions").into());
        }
        pause(Duration::from_millis(10));
    }

    let mut samples = Vec::with_capacity(trips * 2);
    // The moment of each trip is spread uniformly over a poll interval, so
    // the polling figures do not depend on the followers' poll phase.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..trips {
        let name = format!("trip-{i}");
        for f in &mut followers {
            writeln!(f.stdin, "watch {name}")?;
            f.stdin.flush()?;
        }
        expect("ready")?;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        pause(POLL.mul_f64((seed % 1000) as f64 / 1000.0));
        let breaker = CircuitBreaker::builder(name.clone())
            .config(config()?)
            .coordinator(&lane)
            .build()?;
        // The trip happens inside the failing call, and the followers may
        // hear of it before the call returns: time it from just before.
        let mut tripped = wall_ns();
        let mut failures = 0;
        while breaker.state() == State::Closed {
            if failures == MAX_FAILURES {
                return Err(format!("{MAX_FAILURES} failures did not trip {name}").into());
            }
            failures += 1;
            tripped = wall_ns();
            let _ = breaker.call(|| Err::<(), _>(std::io::Error::other("down")));
        }
        let seen = expect("rejected").map_err(|e| {
            format!(
                "{e}; on A: state {}, shared view {:?}",
                breaker.state(),
                breaker.shared_view()
            )
        })?;
        for line in seen {
            // rejected NAME REJECTED_NS NOTICED_NS ADOPTED_NS (0: none)
            let stamps: Vec<u128> = line
                .split(' ')
                .skip(2)
                .map(|t| t.parse().unwrap_or(0))
                .collect();
            let [rejected, noticed, adopted] = stamps[..] else {
                return Err(format!("a malformed line: {line}").into());
            };
            let span = |from: u128, to: u128| {
                (from > 0 && to >= from)
                    .then(|| Duration::from_nanos(u64::try_from(to - from).unwrap_or(u64::MAX)))
            };
            samples.push(Sample {
                total: span(tripped, rejected).unwrap_or(Duration::ZERO),
                to_notice: span(tripped, noticed),
                to_adopted: span(tripped, adopted),
                to_adopt: span(noticed, adopted),
                to_reject: span(adopted, rejected),
            });
        }
        breaker.close();
    }
    for mut f in followers {
        drop(f.stdin); // EOF: the follower exits
        f.child.wait()?;
    }
    Ok(samples)
}

/// One part of a [`Sample`].
#[derive(Clone, Copy)]
enum Part {
    Notice,
    Adopted,
    Adopt,
    Reject,
}

impl Part {
    fn of(self, s: &Sample) -> Option<Duration> {
        match self {
            Part::Notice => s.to_notice,
            Part::Adopted => s.to_adopted,
            Part::Adopt => s.to_adopt,
            Part::Reject => s.to_reject,
        }
    }
}

/// The value at or below which `p` percent of the sorted samples lie
/// (nearest rank).
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Commands the clients sent (not the ones scripts ran inside `EVALSHA`,
/// nor this measurement's own `INFO` and `CONFIG`).
fn client_commands(url: &str) -> Result<Vec<(String, u64)>, Error> {
    const NOT_SENT: [&str; 8] = [
        "info", "config", "hmget", "hset", "exists", "pexpire", "time", "publish",
    ];
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut admin(url)?)?;
    Ok(info
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cmdstat_")?;
            let (name, stats) = rest.split_once(':')?;
            let calls = stats.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .filter(|(name, _)| !NOT_SENT.contains(&name.split('|').next().unwrap_or(name)))
        .collect())
}

/// Commands per poll interval of one storage serving 100 breakers, over
/// ten poll intervals.
fn commands(url: &str, prefix: &str, batched: bool) -> Result<(), Error> {
    const INTERVALS: u32 = 10;
    let lane = Coordinator::blocking(storage(url, prefix, true, batched)?);
    let breakers = (0..100)
        .map(|i| {
            CircuitBreaker::builder(format!("svc-{i}"))
                .coordinator(&lane)
                .build()
        })
        .collect::<Result<Vec<_>, _>>()?;
    pause(POLL * 2 + POLL / 2); // connected, scripts loaded, subscribed
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut admin(url)?)?;
    let started = MonotonicClock.now();
    pause(POLL * INTERVALS);
    let calls = client_commands(url)?;
    let took = MonotonicClock.now().saturating_duration_since(started);
    let intervals = took.as_secs_f64() / POLL.as_secs_f64();
    let total: u64 = calls.iter().map(|(_, n)| n).sum();
    println!(
        "  batched polling {}: {:.1} commands per poll interval ({total} in {:.2} s: {calls:?})",
        if batched { "on " } else { "off" },
        total as f64 / intervals,
        took.as_secs_f64(),
    );
    for b in &breakers {
        b.close();
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("follower") {
        let push = args.get(2).map(String::as_str) == Some("on");
        let prefix = args.get(3).ok_or("follower: no prefix")?;
        let trips = args.get(4).ok_or("follower: no trip count")?.parse()?;
        return follower(&url, prefix, push, trips);
    }
    let trips: usize = match std::env::var("TRIPS") {
        Ok(n) => n.parse()?,
        Err(_) => 200,
    };
    let run = wall_ns() / 1_000_000_000;
    println!(
        "trip-to-rejection latency, 3 processes, poll_interval {POLL:?}, {trips} trips, A -> B and A -> C"
    );
    let runs: &[bool] = match std::env::var("PUSH").as_deref() {
        Ok("on") => &[true],
        Ok("off") => &[false],
        _ => &[true, false],
    };
    for &push in runs {
        let prefix = format!("interlock-measure:{{{run}-{push}}}:");
        let samples = latency(&url, &prefix, push, trips)?;
        let mut total: Vec<Duration> = samples.iter().map(|s| s.total).collect();
        total.sort_unstable();
        println!(
            "  push {}: {} samples, p50 {}, p99 {}, min {}, max {}",
            if push { "on " } else { "off" },
            total.len(),
            ms(percentile(&total, 50.0)),
            ms(percentile(&total, 99.0)),
            ms(percentile(&total, 0.0)),
            ms(percentile(&total, 100.0)),
        );
        if push {
            for (part, pick) in [
                ("trip -> notice in the follower", Part::Notice),
                ("trip -> OPEN adopted", Part::Adopted),
                (
                    "notice -> OPEN adopted (when the notice came first)",
                    Part::Adopt,
                ),
                ("adopted -> call rejected", Part::Reject),
            ] {
                let mut d: Vec<Duration> = samples.iter().filter_map(|s| pick.of(s)).collect();
                d.sort_unstable();
                println!(
                    "    {part}: {} samples, p50 {}, p99 {}, max {}",
                    d.len(),
                    ms(percentile(&d, 50.0)),
                    ms(percentile(&d, 99.0)),
                    ms(percentile(&d, 100.0)),
                );
            }
        }
    }
    println!("Redis commands per poll interval, 100 breakers on one storage");
    for batched in [true, false] {
        let prefix = format!("interlock-measure:{{{run}-poll-{batched}}}:");
        commands(&url, &prefix, batched)?;
    }
    Ok(())
}
