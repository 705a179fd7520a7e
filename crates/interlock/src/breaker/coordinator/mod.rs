//! [`Coordinator`]: one background lane per storage, serving all of its
//! breakers (R17).
//!
//! The lane polls the shared views every `poll_interval` and runs the
//! fire-and-forget writes breakers queue (a local trip, probe outcomes and
//! the fenced round decision). A blocking storage gets a thread, an async
//! one a tokio task (feature `tokio`); a *manual* coordinator gets neither
//! and is driven by [`Coordinator::poll`] and [`Coordinator::run_writes`],
//! for deterministic tests and simulations.

mod backend;
mod batch;
mod handle;
mod operator;
mod worker;

#[cfg(feature = "tokio")]
use backend::isolated;
pub(crate) use backend::{Backend, DynAsyncStorage, guarded, guarded_async};
use batch::Batch;
pub use handle::Coordinator;
#[cfg(feature = "tokio")]
use worker::run_async;
use worker::run_blocking;

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::background::{self, Owner};
use crate::breaker::Inner;
use crate::clock::Timestamp;
use crate::mode::{Async, Blocking};
use crate::state::Outcome;

use crate::store::{
    AsyncStorage, ChangePoll, Epoch, Notice, NoticeHandler, NoticeSink, PollRequest, ProbeLease,
    SharedState, Storage, StorageError, StorageSettings,
};

/// A write queued by a breaker (R17.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Write {
    /// The local machine tripped: open the shared breaker (unfenced).
    Trip,
    /// A leased probe settled.
    Probe(Outcome),
    /// Share a local OPEN the fleet missed, fenced by the CLOSED view it
    /// answers (R15.12).
    Reconcile,
    /// Write back the newest state known over a storage whose history went
    /// backwards (R15.11).
    Repair,
}

pub(crate) enum Item {
    Write(Weak<Inner>, Write),
    /// Shutdown of one breaker: everything queued before it runs first.
    Detach(Weak<Inner>, Arc<Ack>),
}

/// A one-shot acknowledgement a closing breaker waits for.
#[derive(Default)]
pub(crate) struct Ack {
    done: Mutex<bool>,
    cv: Condvar,
}

impl Ack {
    pub(crate) fn set(&self) {
        *self.done.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.cv.notify_all();
    }

    fn wait(&self) {
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        while !*done {
            done = self.cv.wait(done).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[derive(Default)]
struct LaneState {
    queue: VecDeque<Item>,
    members: Vec<Weak<Inner>>,
    running: bool,
    /// The process the worker was started in (it is gone in a `fork()`ed
    /// child, which starts its own at its next attach, write or close).
    owner: Option<Owner>,
    /// The blocking worker's thread: a breaker closed from it (by a
    /// listener) runs its detach there instead of waiting for itself.
    thread: Option<std::thread::ThreadId>,
    /// Breakers a notice said changed, with the version it announced; each
    /// at most once (a newer notice replaces the version).
    refresh: Vec<(Weak<Inner>, u64)>,
    /// A notice said others may have been lost: poll everything.
    poll_all: bool,
    /// The storage said its notices are unavailable: the reason, until the
    /// lane has reported it (R17.11).
    unavailable: Option<String>,
    /// Whether that has been reported (once per lane).
    unavailable_reported: bool,
    /// Where the last batched poll left the storage's change history
    /// (R17.12): the next one asks only for what changed since.
    epoch: Option<Epoch>,
    /// Change polls since the last full one (R17.12).
    change_polls: u64,
}

impl LaneState {
    fn has_work(&self) -> bool {
        !self.queue.is_empty()
            || !self.refresh.is_empty()
            || self.poll_all
            || self.unavailable.is_some()
    }
}

/// Subscription progress of a lane.
const UNSUBSCRIBED: u8 = 0;
const SUBSCRIBING: u8 = 1;
const SUBSCRIBED: u8 = 2;

/// One lane per coordinator.
pub(crate) struct Lane {
    pub(crate) backend: Backend,
    pub(crate) settings: StorageSettings,
    state: Mutex<LaneState>,
    wake: Condvar,
    background: bool,
    /// Mirrors `LaneState::running` so the async admission path can check
    /// it without taking the lane's lock on every call.
    started: AtomicBool,
    /// `UNSUBSCRIBED`, `SUBSCRIBING` or `SUBSCRIBED` to change notices.
    subscription: AtomicU8,
    /// What the storage's subscription calls; the sink holds it weakly, so
    /// the subscription ends with the lane.
    handler: OnceLock<Arc<NoticeHandler>>,
    #[cfg(feature = "tokio")]
    notify: tokio::sync::Notify,
    /// This lane, for [`background::Revive`].
    me: Weak<Lane>,
}

impl Lane {
    fn new(backend: Backend, settings: StorageSettings, background: bool) -> Arc<Self> {
        let lane = Arc::new_cyclic(|me| Lane {
            me: me.clone(),
            backend,
            settings,
            state: Mutex::new(LaneState::default()),
            wake: Condvar::new(),
            background,
            started: AtomicBool::new(false),
            subscription: AtomicU8::new(UNSUBSCRIBED),
            handler: OnceLock::new(),
            #[cfg(feature = "tokio")]
            notify: tokio::sync::Notify::new(),
        });
        if background {
            let weak: Weak<dyn background::Revive> = Arc::downgrade(&lane) as Weak<Lane>;
            background::register(weak);
        }
        lane
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LaneState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn is_async(&self) -> bool {
        matches!(self.backend, Backend::Async(_))
    }

    /// Adds a breaker and starts the lane if it has not started yet.
    ///
    /// The newcomer's first poll is queued at once (run at the lane's next
    /// wake, or the next `run_writes` of a manual coordinator): a breaker
    /// created while the fleet has its state OPEN must not wait a whole
    /// `poll_interval` to learn it.
    pub(crate) fn attach(self: &Arc<Self>, breaker: Weak<Inner>) {
        let mut st = self.state();
        st.members.push(breaker.clone());
        // No version a storage can announce: the refresh always reads.
        st.refresh.push((breaker, u64::MAX));
        drop(st);
        self.ensure_subscribed();
        self.ensure_running_here();
        self.wake();
    }

    /// Whether the storage pushes change notices to this lane.
    pub(crate) fn is_subscribed(&self) -> bool {
        self.subscription.load(Ordering::Acquire) == SUBSCRIBED
    }

    /// Subscribes to the storage's change notices, once, if the settings
    /// ask for it and the storage can push; a storage that cannot right now
    /// (an async one outside a runtime) is asked again at the next attach
    /// or lane start.
    fn ensure_subscribed(self: &Arc<Self>) {
        if !self.settings.notifications()
            || self
                .subscription
                .compare_exchange(
                    UNSUBSCRIBED,
                    SUBSCRIBING,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_err()
        {
            return;
        }
        let handler = self.handler.get_or_init(|| {
            let lane = Arc::downgrade(self);
            Arc::new(move |notice: Notice<'_>| {
                if let Some(lane) = lane.upgrade() {
                    lane.on_notice(notice);
                }
            })
        });
        let sink = NoticeSink::new(handler);
        let subscribed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &self.backend {
                Backend::Blocking(storage) => storage.subscribe(sink),
                Backend::Async(storage) => storage.subscribe(sink),
            }))
            .unwrap_or(false);
        self.subscription.store(
            if subscribed { SUBSCRIBED } else { UNSUBSCRIBED },
            Ordering::Release,
        );
    }

    /// A notice from the storage: queue a refresh of the breakers it names
    /// (their lane checks the version and reads only if it moved), or a
    /// poll of all of them. Never touches a breaker's lock for those: the
    /// storage may deliver them from inside any of its operations. A
    /// notice that carries the record ([`Notice::Written`]) is adopted here
    /// and now instead, outside the lane's lock.
    fn on_notice(&self, notice: Notice<'_>) {
        if let Notice::Written { name, state } = notice {
            let named: Vec<Arc<Inner>> = self
                .state()
                .members
                .iter()
                .filter_map(Weak::upgrade)
                .filter(|b| b.name() == name)
                .collect();
            for breaker in named {
                breaker.adopt_pushed(state);
            }
            return;
        }
        let mut st = self.state();
        match notice {
            Notice::Changed { name, version } => {
                let LaneState {
                    members, refresh, ..
                } = &mut *st;
                let mut queued = false;
                for member in members.iter() {
                    let Some(breaker) = member.upgrade() else {
                        continue;
                    };
                    if breaker.name() != name {
                        continue;
                    }
                    match refresh.iter_mut().find(|(r, _)| Weak::ptr_eq(r, member)) {
                        Some(entry) => entry.1 = version,
                        None => refresh.push((member.clone(), version)),
                    }
                    queued = true;
                }
                if !queued {
                    return;
                }
            }
            Notice::Resync => st.poll_all = true,
            Notice::Unavailable { reason } => {
                if st.unavailable_reported || st.unavailable.is_some() {
                    return;
                }
                st.unavailable = Some(reason.to_owned());
            }
            // Handled above; `Notice` may grow variants this lane ignores.
            _ => return,
        }
        drop(st);
        self.wake();
    }

    /// Says once, on the lane, that change notices are unavailable
    /// (R17.11): an event to every breaker, and a log line.
    fn report_unavailable(&self) {
        let mut st = self.state();
        let Some(reason) = st.unavailable.take() else {
            return;
        };
        st.unavailable_reported = true;
        drop(st);
        log_notices_unavailable(&reason);
        for breaker in self.members() {
            breaker.notices_unavailable(&reason);
        }
    }

    fn wake(&self) {
        self.wake.notify_all();
        #[cfg(feature = "tokio")]
        self.notify.notify_one();
    }

    /// Starts the background worker, if this lane has one and it is not
    /// running (an async lane outside a tokio runtime starts at the first
    /// async admission instead). One atomic load once it runs: the async
    /// admission path calls it for every call.
    pub(crate) fn ensure_running(self: &Arc<Self>) {
        if !self.background || self.started.load(Ordering::Acquire) {
            return;
        }
        self.start_worker();
    }

    /// [`ensure_running`](Self::ensure_running), also when a worker was
    /// started but in another process (this is a `fork()`ed child, where
    /// it does not exist): for attach, writes and close, which need the
    /// worker and are rare enough to pay for the check (a system call).
    pub(crate) fn ensure_running_here(self: &Arc<Self>) {
        if !self.background {
            return;
        }
        let moved = {
            let mut st = self.state();
            let moved = st.running && !st.owner.is_some_and(Owner::is_here);
            if moved {
                st.running = false;
                st.owner = None;
                st.thread = None;
            }
            moved
        };
        if moved {
            self.started.store(false, Ordering::Release);
            // The child's storage copy needs its own subscription, if any.
            self.subscription.store(UNSUBSCRIBED, Ordering::Release);
        }
        self.ensure_running();
        if moved {
            background::forked();
        }
    }

    fn start_worker(self: &Arc<Self>) {
        self.ensure_subscribed();
        let mut st = self.state();
        if st.running {
            return;
        }
        match self.backend {
            Backend::Blocking(_) => {
                let weak = Arc::downgrade(self);
                if let Ok(handle) =
                    background::spawn("interlock-coordinator", move || run_blocking(&weak))
                {
                    st.running = true;
                    st.thread = Some(handle.thread().id());
                }
            }
            Backend::Async(_) =>
            {
                #[cfg(feature = "tokio")]
                if let Ok(handle) = tokio::runtime::Handle::try_current() {
                    let weak = Arc::downgrade(self);
                    handle.spawn(run_async(weak));
                    st.running = true;
                }
            }
        }
        if st.running {
            st.owner = Some(Owner::current());
        }
        self.started.store(st.running, Ordering::Release);
    }

    pub(crate) fn push(self: &Arc<Self>, item: Item) {
        self.ensure_running_here();
        self.state().queue.push_back(item);
        self.wake();
    }

    /// Queues a detach marker and waits until the lane has run it, or runs
    /// the queue here: when there is no background worker, and when this
    /// is the worker's own thread (a listener closing a breaker from a
    /// poll or a write: waiting would wait for itself, and stall every
    /// breaker of the lane).
    pub(crate) fn detach_blocking(self: &Arc<Self>, breaker: Weak<Inner>) {
        let ack = Arc::new(Ack::default());
        self.push(Item::Detach(breaker, ack.clone()));
        let wait = {
            let st = self.state();
            self.background && st.running && st.thread != Some(std::thread::current().id())
        };
        if wait {
            ack.wait();
        } else {
            self.run_queue_blocking();
        }
    }

    /// The async mirror of [`detach_blocking`](Self::detach_blocking).
    pub(crate) async fn detach_async(self: &Arc<Self>, breaker: Weak<Inner>) {
        let ack = Arc::new(Ack::default());
        self.push(Item::Detach(breaker, ack.clone()));
        if self.background && self.state().running {
            AckFuture(ack).await;
        } else {
            self.run_queue_async().await;
        }
    }

    fn pop(&self) -> Option<Item> {
        self.state().queue.pop_front()
    }

    pub(crate) fn members(&self) -> Vec<Arc<Inner>> {
        let mut st = self.state();
        st.members.retain(|m| m.strong_count() > 0);
        st.members.iter().filter_map(Weak::upgrade).collect()
    }

    fn detach(&self, breaker: &Weak<Inner>) {
        self.state()
            .members
            .retain(|m| !Weak::ptr_eq(m, breaker) && m.strong_count() > 0);
    }

    /// Takes the refreshes notices asked for: `None` to poll everything,
    /// or the breakers whose cached version differs from the announced one.
    fn take_refreshes(&self) -> Option<Vec<Arc<Inner>>> {
        let mut st = self.state();
        let refresh = std::mem::take(&mut st.refresh);
        if std::mem::take(&mut st.poll_all) {
            return None;
        }
        drop(st);
        Some(
            refresh
                .into_iter()
                .filter_map(|(b, version)| {
                    b.upgrade().filter(|b| b.shared_version() != Some(version))
                })
                .collect(),
        )
    }

    /// Runs what notices asked for, on a blocking lane.
    pub(crate) fn run_refreshes_blocking(&self) {
        self.report_unavailable();
        match self.take_refreshes() {
            None => self.poll_blocking(),
            Some(breakers) => {
                for breaker in breakers {
                    breaker.poll_blocking(self);
                }
            }
        }
    }

    /// Runs what notices asked for, on an async lane.
    pub(crate) async fn run_refreshes_async(&self) {
        self.report_unavailable();
        match self.take_refreshes() {
            None => self.poll_async().await,
            Some(breakers) => {
                for breaker in breakers {
                    breaker.poll_async(self).await;
                }
            }
        }
    }

    pub(crate) fn run_queue_blocking(&self) {
        while let Some(item) = self.pop() {
            match item {
                Item::Write(breaker, write) => {
                    if let Some(b) = breaker.upgrade() {
                        b.run_write_blocking(self, write);
                    }
                }
                Item::Detach(breaker, ack) => {
                    self.detach(&breaker);
                    ack.set();
                }
            }
        }
    }

    pub(crate) async fn run_queue_async(&self) {
        while let Some(item) = self.pop() {
            match item {
                Item::Write(breaker, write) => {
                    if let Some(b) = breaker.upgrade() {
                        b.run_write_async(self, write).await;
                    }
                }
                Item::Detach(breaker, ack) => {
                    self.detach(&breaker);
                    ack.set();
                }
            }
        }
    }

    /// The epoch the next batched poll asks from: none when a full poll
    /// is due (every `full_poll_interval`, R17.12).
    fn epoch(&self) -> Option<Epoch> {
        let mut st = self.state();
        if st.change_polls >= self.settings.polls_per_full_poll() {
            st.change_polls = 1; // this full poll is the first of the next round
            return None;
        }
        st.change_polls += 1;
        st.epoch
    }

    /// Polls every breaker (R17.2): in one [`Storage::poll_changes`] when
    /// batching is on (which reads only what changed since the last poll
    /// when the storage keeps a change index, R17.12), else one request
    /// per breaker.
    pub(crate) fn poll_blocking(&self) {
        let members = self.members();
        let Backend::Blocking(storage) = &self.backend else {
            return;
        };
        if self.settings.batched_polling() {
            let since = self.epoch();
            let batch = Batch::plan(&members, &self.settings, since.is_some());
            if !batch.requests.is_empty() {
                let answers = guarded(|| storage.poll_changes(since, &batch.requests));
                if let Some(epoch) = batch.settle(answers) {
                    self.state().epoch = epoch;
                }
            }
        } else {
            for breaker in &members {
                breaker.poll_blocking(self);
            }
        }
        // R17.10: a shared round whose probes never report is restarted.
        for breaker in &members {
            breaker.restart_if_stalled_blocking(self);
        }
    }

    /// The async mirror of [`poll_blocking`](Self::poll_blocking).
    pub(crate) async fn poll_async(&self) {
        let members = self.members();
        let Backend::Async(storage) = &self.backend else {
            return;
        };
        if self.settings.batched_polling() {
            let since = self.epoch();
            let batch = Batch::plan(&members, &self.settings, since.is_some());
            if !batch.requests.is_empty() {
                let answers = guarded_async(storage.poll_changes(since, &batch.requests)).await;
                if let Some(epoch) = batch.settle(answers) {
                    self.state().epoch = epoch;
                }
            }
        } else {
            for breaker in &members {
                breaker.poll_async(self).await;
            }
        }
        for breaker in &members {
            breaker.restart_if_stalled_async(self).await;
        }
    }
}

/// Resolves once an [`Ack`] is set (checked on every wake of the lane's
/// notifier; the lane sets acks only from its own task).
struct AckFuture(Arc<Ack>);

impl Future for AckFuture {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if *self.0.done.lock().unwrap_or_else(PoisonError::into_inner) {
            std::task::Poll::Ready(())
        } else {
            // Cheap re-poll: closing is rare and the lane acks promptly.
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

/// The log line of R17.11, once per coordinator: through `tracing` when
/// the feature is on, else on standard error.
#[cold]
fn log_notices_unavailable(reason: &str) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "interlock",
        reason,
        "storage change notices unavailable; the coordinator relies on polling alone"
    );
    #[cfg(not(feature = "tracing"))]
    eprintln!(
        "interlock: storage change notices unavailable ({reason}); the coordinator relies on \
         polling alone"
    );
}

fn real_now() -> Instant {
    #[allow(clippy::disallowed_methods)] // the lane is scheduled on real time
    Instant::now()
}
