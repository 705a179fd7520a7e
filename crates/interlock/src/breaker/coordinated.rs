//! The coordinated side of a breaker (R15, R17): inline probe leases, the
//! writes and polls its lane runs, degradation and recovery, and adoption
//! of shared views.

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::shared_view::{AbsurdVersion, Call};
use super::{Inner, SHARED_BIT, Ticket};
use crate::breaker::coordinator::{Backend, DynAsyncStorage, Lane, Write, guarded, guarded_async};
use crate::clock::Timestamp;
use crate::error::CircuitOpenError;
use crate::event::Event;
use crate::machine::Admission;
use crate::policy::HalfOpenPolicy;
use crate::state::State;
use crate::store::{PollRequest, SharedState, Storage, StorageError, StorageSettings};
use crate::window::rate;

/// What one storage answer means for the breaker.
type Answer<T> = Result<T, StorageError>;

impl Inner {
    /// The lane to lease a probe from, if a healthy shared HALF_OPEN
    /// governs admission (R15.2).
    pub(super) fn lease_lane(&self, _now: Timestamp) -> Option<Arc<Lane>> {
        let lane = self.lane.as_ref()?;
        let status = self.status.load(Ordering::Acquire);
        let shared_half_open =
            State::from_bits(status) == State::HalfOpen && status & SHARED_BIT != 0;
        (shared_half_open && !self.shut_down.load(Ordering::Acquire)).then(|| Arc::clone(lane))
    }

    /// The inline lease of a blocking breaker: `None` when the storage
    /// failed and the local rules must decide.
    pub(super) fn lease_blocking(
        &self,
        lane: &Lane,
        now: Timestamp,
    ) -> Option<Result<Ticket, CircuitOpenError>> {
        let Backend::Blocking(storage) = &lane.backend else {
            return None;
        };
        if self.round_spent() {
            return Some(Err(self.reject(State::HalfOpen, None)));
        }
        let issued = self.shared_version();
        let answer = guarded(|| storage.lease_probe(self.name(), lane.settings.state_ttl()));
        self.after_lease(answer, now, issued)
    }

    /// The inline lease of an async breaker.
    pub(super) async fn lease_async(
        &self,
        lane: &Lane,
        now: Timestamp,
    ) -> Option<Result<Ticket, CircuitOpenError>> {
        let Backend::Async(storage) = &lane.backend else {
            return None;
        };
        if self.round_spent() {
            return Some(Err(self.reject(State::HalfOpen, None)));
        }
        let issued = self.shared_version();
        let answer =
            guarded_async(storage.lease_probe(self.name(), lane.settings.state_ttl())).await;
        self.after_lease(answer, now, issued)
    }

    fn after_lease(
        &self,
        answer: Answer<crate::store::ProbeLease>,
        now: Timestamp,
        issued: Option<u64>,
    ) -> Option<Result<Ticket, CircuitOpenError>> {
        match answer {
            Ok(lease) if lease.state.version > SharedState::MAX_VERSION => {
                self.storage_failed(now, &AbsurdVersion(lease.state.version));
                None
            }
            Ok(lease) => {
                self.storage_answered(lease.state, issued);
                if lease.granted {
                    // A leased probe carries the local generation but never
                    // enters local probe accounting (D2).
                    let generation = self.status.load(Ordering::Acquire) >> super::STATUS_SHIFT;
                    Some(Ok(self.ticket(
                        Admission {
                            generation,
                            probe: true,
                        },
                        true,
                    )))
                } else {
                    Some(Err(self.reject(State::HalfOpen, None)))
                }
            }
            Err(error) => {
                self.storage_failed(now, &*error);
                None
            }
        }
    }

    /// Whether storage operations may run (R17.6): not degraded, or the
    /// retry time has come.
    fn gate_open(&self, now: Timestamp) -> bool {
        let core = self.core();
        core.shared
            .as_ref()
            .is_some_and(|c| !c.degraded || now >= c.retry_at)
    }

    /// A storage operation succeeded with `view`, asked while the cached
    /// version was `issued`: recover if degraded (R17.8: the recovered
    /// event, the change back to the cached view), then adopt the view if
    /// it is newer (R15.6, R15.6a).
    pub(super) fn storage_answered(&self, view: SharedState, issued: Option<u64>) {
        let (recovered, effects) = self.change(|core| {
            let Some(cell) = core.shared.as_mut() else {
                return (false, None);
            };
            let recovered = std::mem::take(&mut cell.degraded);
            if recovered {
                cell.failures = 0;
            }
            (recovered, None)
        });
        if recovered {
            self.emit(&Event::StorageRecovered {
                breaker: self.name(),
            });
            self.after(effects);
        }
        self.adopt(view, issued);
    }

    /// A storage operation failed: degrade, once per outage (R17.6).
    pub(crate) fn storage_failed(
        &self,
        now: Timestamp,
        error: &(dyn Error + Send + Sync + 'static),
    ) {
        let settings = self
            .lane
            .as_ref()
            .map(|l| l.settings.clone())
            .unwrap_or_default();
        let (first, effects) = self.change(|core| {
            let Some(cell) = core.shared.as_mut() else {
                return (false, None);
            };
            let first = !cell.degraded;
            cell.degraded = true;
            let delay =
                settings.retry_delay_with_jitter(cell.failures, self.name(), now.as_nanos());
            cell.retry_at = now.saturating_add(delay);
            cell.failures = cell.failures.saturating_add(1);
            (first, None)
        });
        if first {
            self.emit(&Event::StorageDegraded {
                breaker: self.name(),
                error,
            });
        }
        self.after(effects);
    }

    /// Whether a finished shared round failed, by the breaker's own
    /// half-open policy over the shared tallies (R17.4). `None` while the
    /// round is still undecided.
    fn shared_round_failed(&self, view: &SharedState) -> Option<bool> {
        if view.state != State::HalfOpen || view.probes_permitted == 0 {
            return None;
        }
        let c = &self.config;
        match c.half_open_policy() {
            HalfOpenPolicy::ConsecutiveSuccesses { successes } => {
                if view.probe_failures > 0 || view.probe_slows > 0 {
                    Some(true)
                } else if view.probes_completed >= successes {
                    Some(false)
                } else {
                    None
                }
            }
            _ => {
                if !view.round_finished() {
                    return None;
                }
                let done = u64::from(view.probes_completed);
                Some(
                    rate(u64::from(view.probe_failures), done) >= c.failure_rate_threshold()
                        || rate(u64::from(view.probe_slows), done) >= c.slow_call_rate_threshold(),
                )
            }
        }
    }

    /// Runs one queued write on a blocking lane (R17.4, R15.11, R15.12).
    pub(crate) fn run_write_blocking(&self, lane: &Lane, write: Write) {
        self.queued.fetch_sub(1, Ordering::AcqRel);
        let now = self.clock.now();
        let Backend::Blocking(storage) = &lane.backend else {
            return;
        };
        // Resolved first even when it is dropped: a dropped repair or
        // reconciliation must not leave its "queued" mark behind.
        let call = self.resolve(write);
        if !self.gate_open(now) {
            return; // R17.6: dropped silently while degraded
        }
        let Some(call) = call else {
            return;
        };
        let (name, ttl) = (self.name(), lane.settings.state_ttl());
        let issued = self.shared_version();
        let answer = guarded(|| call_blocking(&**storage, call, name, ttl));
        let Some(view) = self.settle_answer(answer, now, issued) else {
            return;
        };
        if let (Call::Record(_), Some(failed)) = (call, self.shared_round_failed(&view)) {
            // Only the instance whose record completed the round decides;
            // the version fences out a stale decision.
            let decision = guarded(|| {
                if failed {
                    storage.trip_open(name, ttl, Some(view.version))
                } else {
                    storage.close(name, ttl, Some(view.version))
                }
            });
            self.settle_answer(decision, now, Some(view.version));
        }
    }

    /// Runs one queued write on an async lane (R17.4, R15.11, R15.12).
    pub(crate) async fn run_write_async(&self, lane: &Lane, write: Write) {
        self.queued.fetch_sub(1, Ordering::AcqRel);
        let now = self.clock.now();
        let Backend::Async(storage) = &lane.backend else {
            return;
        };
        let call = self.resolve(write);
        if !self.gate_open(now) {
            return;
        }
        let Some(call) = call else {
            return;
        };
        let (name, ttl) = (self.name(), lane.settings.state_ttl());
        let issued = self.shared_version();
        let answer = guarded_async(call_async(&**storage, call, name, ttl)).await;
        let Some(view) = self.settle_answer(answer, now, issued) else {
            return;
        };
        if let (Call::Record(_), Some(failed)) = (call, self.shared_round_failed(&view)) {
            let decision = if failed {
                guarded_async(storage.trip_open(name, ttl, Some(view.version))).await
            } else {
                guarded_async(storage.close(name, ttl, Some(view.version))).await
            };
            self.settle_answer(decision, now, Some(view.version));
        }
    }

    /// Restarts this breaker's shared round if it stalled (R17.10), on a
    /// blocking lane.
    pub(crate) fn restart_if_stalled_blocking(&self, lane: &Lane) {
        let now = self.clock.now();
        let Backend::Blocking(storage) = &lane.backend else {
            return;
        };
        if self.shut_down.load(Ordering::Acquire) || !self.gate_open(now) {
            return;
        }
        let Some(expected) = self.stalled_round(now) else {
            return;
        };
        let (permitted, ttl) = (
            self.config.permitted_calls_in_half_open(),
            lane.settings.state_ttl(),
        );
        let answer =
            guarded(|| storage.restart_stalled_round(self.name(), expected, permitted, ttl));
        self.settle_answer(answer, now, Some(expected));
    }

    /// The async mirror of [`restart_if_stalled_blocking`](Self::restart_if_stalled_blocking).
    pub(crate) async fn restart_if_stalled_async(&self, lane: &Lane) {
        let now = self.clock.now();
        let Backend::Async(storage) = &lane.backend else {
            return;
        };
        if self.shut_down.load(Ordering::Acquire) || !self.gate_open(now) {
            return;
        }
        let Some(expected) = self.stalled_round(now) else {
            return;
        };
        let (permitted, ttl) = (
            self.config.permitted_calls_in_half_open(),
            lane.settings.state_ttl(),
        );
        let answer =
            guarded_async(storage.restart_stalled_round(self.name(), expected, permitted, ttl))
                .await;
        self.settle_answer(answer, now, Some(expected));
    }

    /// Adopts a storage answer to a request sent while the cached version
    /// was `issued`, or degrades on its error (or on a view with an absurd
    /// version, R16.7). Returns the view when the storage answered.
    pub(crate) fn settle_answer(
        &self,
        answer: Answer<SharedState>,
        now: Timestamp,
        issued: Option<u64>,
    ) -> Option<SharedState> {
        match answer {
            Ok(view) if view.version > SharedState::MAX_VERSION => {
                self.storage_failed(now, &AbsurdVersion(view.version));
                None
            }
            Ok(view) => {
                self.storage_answered(view, issued);
                Some(view)
            }
            Err(error) => {
                self.storage_failed(now, &*error);
                None
            }
        }
    }

    /// The version of the cached shared view, if any.
    pub(crate) fn shared_version(&self) -> Option<u64> {
        self.core().shared.as_ref()?.view.map(|v| v.version)
    }

    /// The breaker's clock reading.
    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// What a poll asks (R17.2): begin HALF_OPEN if the cached view is OPEN,
    /// read otherwise. `None` if the poll is skipped (shut down, or the
    /// storage gate is closed while degraded).
    pub(crate) fn poll_request(
        &self,
        now: Timestamp,
        settings: &StorageSettings,
    ) -> Option<PollRequest<'_>> {
        if self.shut_down.load(Ordering::Acquire) || !self.gate_open(now) {
            return None;
        }
        let open = self
            .core()
            .shared
            .as_ref()?
            .view
            .is_some_and(|v| v.state == State::Open);
        let name = self.name();
        Some(if open {
            PollRequest::BeginHalfOpen {
                name,
                wait: self.config.wait_duration_in_open(),
                permitted: self.config.permitted_calls_in_half_open(),
                ttl: settings.state_ttl(),
            }
        } else {
            PollRequest::Read { name }
        })
    }

    /// Polls this breaker's shared state on a blocking lane.
    pub(crate) fn poll_blocking(&self, lane: &Lane) {
        let now = self.clock.now();
        let Backend::Blocking(storage) = &lane.backend else {
            return;
        };
        let Some(request) = self.poll_request(now, &lane.settings) else {
            return;
        };
        let issued = self.shared_version();
        let answer = guarded(|| storage.poll_one(&request));
        if self.settle_answer(answer, now, issued).is_some() {
            self.mark_polled();
        }
    }

    /// Polls this breaker's shared state on an async lane.
    pub(crate) async fn poll_async(&self, lane: &Lane) {
        let now = self.clock.now();
        let Backend::Async(storage) = &lane.backend else {
            return;
        };
        let Some(request) = self.poll_request(now, &lane.settings) else {
            return;
        };
        let issued = self.shared_version();
        let answer = guarded_async(storage.poll_one(&request)).await;
        if self.settle_answer(answer, now, issued).is_some() {
            self.mark_polled();
        }
    }
}

/// Runs a resolved write on a blocking storage.
fn call_blocking(
    storage: &dyn Storage,
    call: Call,
    name: &str,
    ttl: std::time::Duration,
) -> Answer<SharedState> {
    match call {
        Call::Trip(expected) => storage.trip_open(name, ttl, expected),
        Call::Record(outcome) => storage.record_probe(name, outcome, ttl),
        Call::Restore { expected, state } => storage.restore(name, expected, state, ttl),
    }
}

/// Runs a resolved write on an async storage.
async fn call_async(
    storage: &dyn DynAsyncStorage,
    call: Call,
    name: &str,
    ttl: std::time::Duration,
) -> Answer<SharedState> {
    match call {
        Call::Trip(expected) => storage.trip_open(name, ttl, expected).await,
        Call::Record(outcome) => storage.record_probe(name, outcome, ttl).await,
        Call::Restore { expected, state } => storage.restore(name, expected, state, ttl).await,
    }
}
