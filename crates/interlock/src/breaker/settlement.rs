//! Settlement: measuring a call, classifying its result and handing the
//! outcome to the machine, panic-safe (R4, R8.8).

use super::*;

/// The last failure's message when the error's `Display` panicked while
/// the breaker recorded it (the panic then continues to the caller).
pub(crate) const DISPLAY_PANICKED: &str = "<the error's Display panicked>";

/// Hands a probe slot back if settlement unwinds before the machine has the
/// outcome (user code such as a custom clock panicked); disarmed with
/// `mem::forget` once recorded.
pub(super) struct Unrecorded<'a> {
    pub(super) inner: &'a Inner,
    pub(super) ticket: Ticket,
}

impl Drop for Unrecorded<'_> {
    fn drop(&mut self) {
        self.inner.release(self.ticket);
    }
}

/// Releases an unsettled call's slot if dropped (cancellation, panic).
pub(super) struct Guard<'a> {
    pub(super) inner: &'a Inner,
    pub(super) ticket: Ticket,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.inner.release(self.ticket);
    }
}

impl Guard<'_> {
    #[inline]
    pub(super) fn settle(self, verdict: Verdict, error: Option<ErrorText<'_>>) {
        let this = std::mem::ManuallyDrop::new(self);
        this.inner.settle(this.ticket, verdict, error);
    }

    /// Settles a default-classified call; an error that carries another
    /// breaker's rejection is ignored (the guard is dropped: nothing is
    /// recorded, a probe slot goes back).
    ///
    /// A success goes straight to [`Inner::settle_success`], inlined into
    /// the caller with its lock-free paths; an error settles out of line.
    #[inline(always)]
    pub(super) fn settle_result<T, E: Failure<K>, K>(self, result: &Result<T, E>) {
        match result {
            Ok(_) => {
                let this = std::mem::ManuallyDrop::new(self);
                this.inner.settle_success(this.ticket);
            }
            Err(e) => self.settle_error(e),
        }
    }

    /// The `Err` arm of [`settle_result`](Self::settle_result), out of line
    /// so that the success path around it stays small.
    #[cold]
    #[inline(never)]
    fn settle_error<E: Failure<K>, K>(self, e: &E) {
        if let Some(verdict) = self.inner.classify_error(e.as_error()) {
            self.settle(verdict, Some(ErrorText::of(e)));
        }
    }
}

/// A classified call's error, as the breaker keeps it.
pub(super) fn error_text<T, E: fmt::Display>(result: &Result<T, E>) -> Option<ErrorText<'_>> {
    result.as_ref().err().map(ErrorText::of)
}

impl Inner {
    /// Records a settled call (R4), then reports it (R13.4: the call, then
    /// any transition it caused), then queues shared writes (R15.4).
    #[inline]
    pub(super) fn settle(&self, ticket: Ticket, verdict: Verdict, error: Option<ErrorText<'_>>) {
        if verdict == Verdict::Success {
            self.settle_success(ticket);
        } else {
            self.settle_at(ticket, self.clock.now(), verdict, error);
        }
    }

    /// Settles a success. The common case, a call that was not slow in a
    /// breaker whose machine said a success changes nothing (QUIET_BIT),
    /// with no listener to tell, returns after one clock read and one load:
    /// no lock and no shared write.
    #[inline(always)]
    pub(super) fn settle_success(&self, ticket: Ticket) {
        let end = self.clock.now_unmarked();
        // Wrapping: a clock that went backwards gives a huge duration, which
        // takes the general path (and its saturating arithmetic).
        let elapsed_nanos = end.as_nanos().wrapping_sub(ticket.start.as_nanos());
        if elapsed_nanos < self.quiet_below_nanos {
            // See `settle_at` for why skipping the lock is linearizable.
            let status = self.status.load(Ordering::Acquire);
            if ticket.quiet_in(status) {
                return;
            }
            // Otherwise a success lane, if the machine allows it (`tally.rs`).
            if self.on_lane(ticket, status, end) {
                return;
            }
        }
        self.settle_success_at(ticket, end);
    }

    /// A success that did not take the lock-free paths above: out of line,
    /// so that they inline into the caller without its weight.
    ///
    /// A breaker with listeners comes here for every success
    /// (`quiet_below_nanos` is zero): the call is measured as the general
    /// path measures it, and a plain success that changes nothing (quiet)
    /// or fits a success lane is counted without the lock and reported,
    /// exactly as the general path would report it (a plain success causes
    /// no transition, so its event is the only one, R13.4).
    #[inline(never)]
    fn settle_success_at(&self, ticket: Ticket, end: Timestamp) {
        if !self.listeners.is_empty() {
            let (measured, elapsed_nanos) = self.measure(ticket.start, end);
            if elapsed_nanos < self.slow_nanos {
                let status = self.status.load(Ordering::Acquire);
                if ticket.quiet_in(status) || self.on_lane(ticket, status, measured) {
                    self.report_call(Outcome::Success, elapsed_nanos);
                    return;
                }
            }
            // A slow call, or one the machine must see: the general path,
            // from the call's first end reading, as before.
        }
        self.settle_at(ticket, end, Verdict::Success, None);
    }

    /// Whether a plain success of `ticket` that ended at `end` was counted
    /// on a success lane (`status` of this ticket's generation, no shared
    /// view in charge, and the lanes' own key allowing it).
    #[inline(always)]
    fn on_lane(&self, ticket: Ticket, status: u64, end: Timestamp) -> bool {
        ticket.tally_in(status) && self.tally.try_add(ticket.generation(), end)
    }

    /// Tells the listeners a call settled as `outcome` after `elapsed_nanos`.
    fn report_call(&self, outcome: Outcome, elapsed_nanos: u64) {
        emit(
            &self.listeners,
            &Event::call_recorded(self.name(), outcome, Duration::from_nanos(elapsed_nanos)),
        );
    }

    /// The call's end and duration in nanoseconds. On `CoarseClock` a call
    /// within a factor two below the slow threshold is measured again to a
    /// precise end, so a tick of lag never hides a slow call (R4.3).
    pub(super) fn measure(&self, start: Timestamp, end: Timestamp) -> (Timestamp, u64) {
        let elapsed = end.as_nanos().saturating_sub(start.as_nanos());
        if (self.refine_nanos..self.slow_nanos).contains(&elapsed) {
            let end = self.clock.now_fresh();
            (end, end.as_nanos().saturating_sub(start.as_nanos()))
        } else {
            (end, elapsed)
        }
    }

    /// The general settlement, after the call ended at `end`.
    ///
    /// Panic-safe: user code that runs here (the error's `Display`, a
    /// custom clock) never leaks a probe slot. A panicking `Display` is
    /// caught, the call settles as classified (its last failure reads
    /// [`DISPLAY_PANICKED`]), listeners hear of it, and the panic then
    /// continues to the caller; any other unwind before the machine has the
    /// outcome hands the slot back, as a cancelled call does (R4.5).
    pub(super) fn settle_at(
        &self,
        ticket: Ticket,
        end: Timestamp,
        verdict: Verdict,
        error: Option<ErrorText<'_>>,
    ) {
        let unrecorded = Unrecorded {
            inner: self,
            ticket,
        };
        let (end, elapsed_nanos) = self.measure(ticket.start, end);
        let slow = elapsed_nanos >= self.slow_nanos;
        let outcome = Outcome::from_flags(verdict.is_failure(), slow);
        let inconclusive = verdict == Verdict::Inconclusive;
        // R11.3: an error judged a failure becomes the last failure, kept
        // under the lock its outcome is recorded under.
        let mut effects = None;
        let panicked = match error {
            Some(text) if verdict.is_failure() => {
                with_kept(text, |keep| {
                    effects = self.record_settled(ticket, end, outcome, inconclusive, Some(keep));
                })
                .1
            }
            _ => {
                effects = self.record_settled(ticket, end, outcome, inconclusive, None);
                None
            }
        };
        // Recorded (or nothing to record): the slot is the machine's again.
        std::mem::forget(unrecorded);
        if !self.listeners.is_empty() {
            self.report_call(outcome, elapsed_nanos);
        }
        // R9.6: a leased probe's verdict always counts in the storage, and
        // R15.4: it is queued before the local trip it causes, as in 2.8.2
        // (queued after, the trip would end the shared round first and the
        // probe would never be tallied).
        let probe = ticket.leased().then_some(Write::Probe(outcome));
        match effects {
            Some(effects) => self.after_settled(effects, probe),
            None => {
                if let Some(probe) = probe {
                    self.enqueue(probe);
                }
            }
        }
        if let Some(payload) = panicked {
            std::panic::resume_unwind(payload);
        }
    }

    /// Records a settled outcome if the machine counts it, and keeps the
    /// last failure in any case (R11.3); the effects of a record.
    #[inline]
    fn record_settled(
        &self,
        ticket: Ticket,
        end: Timestamp,
        outcome: Outcome,
        inconclusive: bool,
        keep: Option<&Keep<'_>>,
    ) -> Option<Effects> {
        let status = self.status.load(Ordering::Acquire);
        let current = status >> STATUS_SHIFT == ticket.generation();
        // Stale calls (R8.8) and DISABLED (R8.10) change nothing in the
        // machine: skip the lock. So does a plain success while the machine
        // of this generation has said that one changes nothing (QUIET_BIT).
        //
        // Why skipping is linearizable: the machine decides the bit, under
        // the lock, from its own state, and every change of that state
        // republishes it (with the generation, in the same word) before the
        // lock is released. The skipped success takes effect at the load
        // above. Any record that makes successes count again (a failure, a
        // slow call, a transition) either had published its word before
        // that load (then this load sees the bit cleared or the generation
        // moved, and takes the lock), or had not: then it is still in
        // progress, and the success is ordered before it, at a point where
        // recording it changed nothing. A concurrent failure that trips may
        // therefore be ordered after the skipped success, exactly as if the
        // success had won the lock first; the window it finds is the same.
        let quiet = status & QUIET_BIT != 0 && outcome == Outcome::Success;
        if current && !quiet && State::from_bits(status) != State::Disabled {
            return Some(self.record(ticket, end, outcome, inconclusive, keep));
        }
        if let Some(keep) = keep {
            self.keep_failure(&mut self.core().failure, keep);
        }
        None
    }

    /// The locked part of [`settle`](Self::settle): the machine records the
    /// outcome (and the last failure is kept, under the same lock).
    pub(super) fn record(
        &self,
        ticket: Ticket,
        end: Timestamp,
        outcome: Outcome,
        inconclusive: bool,
        keep: Option<&Keep<'_>>,
    ) -> Effects {
        let inconclusive = inconclusive && !ticket.leased();
        let unfolded = |core: &Core| {
            // The lanes hold successes of the machine's head second only
            // (their key carries it): see the machine's rule. A plain
            // success always folds: a full lane is one reason it takes
            // the lock, and only a fold makes room.
            outcome != Outcome::Success
                && core.tally_key.is_some()
                && core.machine.may_record_before_waiting_successes(
                    end,
                    ticket.admission(),
                    outcome,
                )
        };
        let ((), effects) = self.change_unless(unfolded, |core| {
            if let Some(keep) = keep {
                self.keep_failure(&mut core.failure, keep);
            }
            // D2: a leased probe never touches local probe accounting.
            if ticket.leased() && core.machine.state() == State::HalfOpen {
                return ((), None);
            }
            (
                (),
                core.machine
                    .record(end, ticket.admission(), outcome, inconclusive),
            )
        });
        effects
    }

    /// Hands back a cancelled call's probe slot (R4.5, R8.9). A leased probe
    /// is never handed back (there is no un-lease, R15.4).
    pub(super) fn release(&self, ticket: Ticket) {
        if ticket.probe() && !ticket.leased() {
            self.core().machine.release(ticket.admission());
        }
    }

    /// The verdict on a call that failed with `err`, through the breaker's
    /// classifier; `None` (ignore the call) if `err` carries a circuit-open
    /// rejection: another breaker refused the call, which says nothing about
    /// this breaker's dependency.
    #[cold]
    pub(super) fn classify_error(&self, err: &(dyn Error + 'static)) -> Option<Verdict> {
        if find_rejection(err).is_some() {
            return None;
        }
        Some(match &self.classifier {
            Some(c) => c.classify(err),
            None => Verdict::Failure,
        })
    }
}
