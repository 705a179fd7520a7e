//! Admission: the lock-free door (CLOSED and OPEN decided from the status
//! word and the OPEN deadline), the locked path for everything else, and the
//! rejections it hands out (R6).

use super::*;

/// An admitted call, before it settles: two words, so it stays in
/// registers on the way from admission to settlement.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticket {
    pub(crate) start: Timestamp,
    /// Laid out like the status word it is checked against:
    /// `generation << 5 | QUIET_BIT | leased << 2 | probe`. Bits 0 and 1
    /// are ignored by [`quiet_in`](Self::quiet_in).
    pub(super) tag: u64,
}

/// The ticket's `leased` bit: the status word's [`HOLDS_CALLS_BIT`]. While
/// the quiet bit is set the local machine is CLOSED, so that bit is set only
/// when a shared view governs, and then so is [`SHARED_BIT`], which a ticket
/// never has: a leased ticket never passes [`Ticket::quiet_in`].
pub(super) const LEASED_TAG: u64 = HOLDS_CALLS_BIT;

pub(super) const PROBE_TAG: u64 = 1;

impl Ticket {
    pub(super) fn new(start: Timestamp, admission: Admission, leased: bool) -> Self {
        Ticket {
            start,
            tag: (admission.generation << STATUS_SHIFT)
                | QUIET_BIT
                | (u64::from(leased) * LEASED_TAG)
                | (u64::from(admission.probe) * PROBE_TAG),
        }
    }

    /// The admission's generation.
    #[inline]
    pub(crate) fn generation(self) -> u64 {
        self.tag >> STATUS_SHIFT
    }

    /// Whether a success of this ticket may skip the lock: `status` has the
    /// quiet bit, no shared view in charge, this ticket's generation, and
    /// the ticket is not leased. One xor and one mask test.
    #[inline]
    pub(super) fn quiet_in(self, status: u64) -> bool {
        (status ^ self.tag) & !(PROBE_TAG | 2) == 0
    }

    /// Whether a success of this ticket may be offered to the success
    /// lanes: `status` is of this ticket's generation, no shared view is in
    /// charge and the ticket is not leased (the quiet bit aside, as in
    /// [`quiet_in`](Self::quiet_in)). The lanes' own tag says whether the
    /// machine allows it.
    #[inline]
    pub(super) fn tally_in(self, status: u64) -> bool {
        (status ^ self.tag) & !(PROBE_TAG | 2 | QUIET_BIT) == 0
    }

    /// Admitted as a HALF_OPEN probe.
    #[inline]
    pub(crate) fn probe(self) -> bool {
        self.tag & PROBE_TAG != 0
    }

    /// Admitted through a shared HALF_OPEN lease (R15.2).
    #[inline]
    pub(crate) fn leased(self) -> bool {
        self.tag & LEASED_TAG != 0
    }

    pub(crate) fn admission(self) -> Admission {
        Admission {
            generation: self.generation(),
            probe: self.probe(),
        }
    }
}

/// What lock-free admission found.
pub(super) enum Door {
    /// Admitted without the lock.
    Admit(Admission),
    /// Rejected in this state, `retry_after` in nanoseconds ([`NO_ESTIMATE`]
    /// for none).
    Reject(State, u64),
    /// The lock (or the storage) decides.
    Decide,
}

/// The local OPEN deadline as lock-free readers see it: nanoseconds, at most
/// one below [`NO_ESTIMATE`] (a wait of 584 years saturates a nanosecond
/// early), so `deadline - now` is always an estimate.
pub(super) fn lock_free_deadline(core: &Core) -> u64 {
    core.machine.open_until().as_nanos().min(NO_ESTIMATE - 1)
}

/// Whether the status word's state admits every call without the lock.
#[inline]
pub(super) fn admits_all(status: u64) -> bool {
    status & HOLDS_CALLS_BIT == 0
}

impl Inner {
    /// [`reject`](Self::reject) with `retry_after` in nanoseconds
    /// ([`NO_ESTIMATE`] for none).
    #[inline]
    pub(super) fn reject_nanos(&self, state: State, retry_after_nanos: u64) -> CircuitOpenError {
        // A rejected call is a use too: a breaker kept OPEN by traffic is
        // not idle.
        self.usage.touch_on(&self.clock);
        if !self.listeners.is_empty() {
            self.report_rejection(state);
        }
        CircuitOpenError::with_nanos(&self.identity, state, retry_after_nanos)
    }

    #[inline]
    pub(super) fn reject(&self, state: State, retry_after: Option<Duration>) -> CircuitOpenError {
        self.reject_nanos(state, estimate_nanos(retry_after))
    }

    /// Out of line, so a rejection nobody listens to builds no event.
    #[cold]
    #[inline(never)]
    pub(super) fn report_rejection(&self, state: State) {
        emit(
            &self.listeners,
            &Event::CallRejected {
                breaker: self.name(),
                state,
            },
        );
    }

    #[inline]
    pub(super) fn ticket(&self, admission: Admission, leased: bool) -> Ticket {
        // R4.2: the call's clock starts after admission.
        let start = self.clock.now();
        self.usage.touch(start);
        Ticket::new(start, admission, leased)
    }

    /// The lock-free part of admission (R6).
    #[inline]
    pub(super) fn door(&self) -> Door {
        let status = self.status.load(Ordering::Acquire);
        if admits_all(status) {
            return Door::Admit(Admission {
                generation: status >> STATUS_SHIFT,
                probe: false,
            });
        }
        // A local OPEN (the state bits say OPEN, the shared bit is clear).
        if status & LOCAL_STATE_BITS == State::Open.to_bits() {
            let until = self.open_until.load(Ordering::Relaxed);
            let mut now = self.clock.now().as_nanos();
            if now < until && until - now <= self.deadline_slack_nanos {
                now = self.clock.now_fresh().as_nanos();
            }
            return if now < until {
                // Below `NO_ESTIMATE`: `until` is (`lock_free_deadline`).
                Door::Reject(State::Open, until - now)
            } else {
                Door::Decide
            };
        }
        match State::from_bits(status) {
            State::HalfOpen => Door::Decide,
            // FORCED_OPEN, and a shared OPEN (R15.5: no lazy path and no
            // estimate).
            state => Door::Reject(state, NO_ESTIMATE),
        }
    }

    /// Admission for the blocking API: a shared HALF_OPEN leases inline.
    ///
    /// Everything but the locked decision is inlined into the caller, so
    /// that neither the ticket nor the rejection is copied through memory
    /// on the way out.
    #[inline]
    pub(crate) fn admit(&self) -> Result<Ticket, CircuitOpenError> {
        match self.door() {
            Door::Admit(admission) => Ok(self.ticket(admission, false)),
            Door::Reject(state, nanos) => Err(self.reject_nanos(state, nanos)),
            Door::Decide => self.admit_slow_blocking(),
        }
    }

    #[cold]
    pub(super) fn admit_slow_blocking(&self) -> Result<Ticket, CircuitOpenError> {
        let now = self.clock.now();
        if let Some(lane) = self.lease_lane(now) {
            if let Some(result) = self.lease_blocking(&lane, now) {
                return result;
            }
        }
        self.admit_locked(now).map(|a| self.ticket(a, false))
    }

    /// Admission for the async API.
    pub(crate) async fn admit_async(&self) -> Result<Ticket, CircuitOpenError> {
        if let Some(lane) = &self.lane {
            lane.ensure_running();
        }
        match self.door() {
            Door::Admit(admission) => Ok(self.ticket(admission, false)),
            Door::Reject(state, nanos) => Err(self.reject_nanos(state, nanos)),
            Door::Decide => {
                let now = self.clock.now();
                if let Some(lane) = self.lease_lane(now) {
                    if let Some(result) = self.lease_async(&lane, now).await {
                        return result;
                    }
                }
                self.admit_locked(now).map(|a| self.ticket(a, false))
            }
        }
    }

    /// The local rules under the lock (R6, R15.2 when the storage is out).
    #[cold]
    pub(super) fn admit_locked(&self, now: Timestamp) -> Result<Admission, CircuitOpenError> {
        let (result, effects) = self.change(|core| {
            let before = core.machine.state();
            let r = core.machine.try_acquire(now);
            let local = match &r {
                Ok((_, t)) => *t,
                // A refusal moves the state only when it abandoned a
                // stalled round and re-opened (D7, R9.4).
                Err(_) => {
                    let after = core.machine.state();
                    (after != before).then_some(Transition {
                        from: before,
                        to: after,
                    })
                }
            };
            (r, local)
        });
        self.after(effects);
        match result {
            Ok((admission, _)) => Ok(admission),
            Err(refusal) => Err(self.reject(refusal.state, refusal.retry_after)),
        }
    }
}
