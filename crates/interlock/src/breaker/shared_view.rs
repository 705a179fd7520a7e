//! How a coordinated breaker keeps its view of the shared state current and
//! the shared state alive (issue 21): monotone adoption of storage answers
//! (R15.6a), repair of a storage whose history went backwards (R15.11),
//! reconciliation of a local OPEN the fleet missed (R15.12), and the stall
//! rule of a shared HALF_OPEN round (R17.10).

use std::fmt;
use std::time::Duration;

use super::Inner;
use crate::breaker::coordinator::Write;
use crate::clock::Timestamp;
use crate::config::Config;
use crate::event::Event;
use crate::state::State;
use crate::store::SharedState;

/// How long a shared HALF_OPEN round may go with no slot left and no
/// progress before a coordinator restarts it (R17.10): the local machine's
/// bound for the same stall, `max_wait_in_half_open` (ruling D7), which
/// follows `wait_duration_in_open` unless set. `Duration::MAX` never
/// restarts a shared round.
pub(crate) fn stall_bound(config: &Config) -> Duration {
    config.max_wait_in_half_open()
}

/// The liveness bookkeeping of one coordinated breaker, under its lock.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Liveness {
    /// Stall rule: the version of a cached HALF_OPEN view with no slot
    /// left, and when (breaker clock) that version was first seen.
    full_since: Option<(u64, Timestamp)>,
    /// The local machine opened (a trip or a re-open) and no storage answer
    /// has shown an OPEN or HALF_OPEN since: the fleet may have missed it.
    unshared_open: bool,
    /// A reconciliation write is queued.
    reconcile_queued: bool,
    /// The storage's history went backwards: the version of the answer that
    /// showed it, which the queued repair is fenced on.
    repair_from: Option<u64>,
    /// The version of the cached view when a poll last read this breaker
    /// (R17.12): a view adopted since from anything else (a notice, a
    /// write's answer) is read again at the next change poll, so a storage
    /// that lost those writes is noticed.
    polled: Option<u64>,
    /// The storage's clock as the last change poll that answered this
    /// breaker read its epoch, and this breaker's clock when that poll was
    /// planned (R17.13): the backend's time now is at most their sum plus
    /// the time since on this clock.
    poll_anchor: Option<(Timestamp, Timestamp)>,
}

/// What an answer means next to the cached view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Judgement {
    /// Newer (or the first view): adopt it.
    Adopt,
    /// The cached view itself.
    Same,
    /// Older than the cached view but not older than the storage was when
    /// the request was sent: an answer overtaken in flight. Ignored.
    Stale,
    /// Older than what the storage had already shown when the request was
    /// sent, or a different record at the cached version: the storage lost
    /// history (a restart from an old dump or empty, an expired key, a
    /// lagging replica). Repaired, never adopted.
    Regressed,
}

/// Judges `answer` to a request sent while the cached view had version
/// `issued` (R15.6a). Versions only grow within one history of a record,
/// so an answer older than `issued` proves the storage went backwards.
pub(crate) fn judge(
    cached: Option<SharedState>,
    answer: &SharedState,
    issued: Option<u64>,
) -> Judgement {
    let Some(cached) = cached else {
        return Judgement::Adopt;
    };
    if *answer == cached {
        Judgement::Same
    } else if answer.version > cached.version {
        Judgement::Adopt
    } else if answer.version == cached.version || issued.is_some_and(|f| answer.version < f) {
        Judgement::Regressed
    } else {
        Judgement::Stale
    }
}

/// What a repair writes back (R15.11): the newest state this instance
/// knows, at the cached version (the storage lifts it above): an OPEN or
/// HALF_OPEN as OPEN since the same `opened_at` (a HALF_OPEN's next poll
/// begins a fresh round at once), a CLOSED with a local OPEN the fleet
/// missed as OPEN now, else CLOSED.
fn repair_target(cached: &SharedState, open_now: bool) -> SharedState {
    let open = |opened_at| SharedState {
        state: State::Open,
        opened_at,
        version: cached.version,
        ..SharedState::closed()
    };
    match cached.state {
        State::Open | State::HalfOpen => open(cached.opened_at),
        // The storage clamps a future `opened_at` to its now.
        _ if open_now => open(Timestamp::from_nanos(u64::MAX)),
        _ => SharedState {
            version: cached.version,
            ..SharedState::closed()
        },
    }
}

/// A storage answered with a version above [`SharedState::MAX_VERSION`]:
/// a corrupt record, refused like a storage error.
#[derive(Debug)]
pub(crate) struct AbsurdVersion(pub(crate) u64);

impl fmt::Display for AbsurdVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the storage answered version {}, above the largest valid version 2^50: \
             a corrupt record",
            self.0
        )
    }
}

impl std::error::Error for AbsurdVersion {}

/// What [`Inner::adopt`] leaves for the lane to do.
#[derive(Clone, Copy, Debug, Default)]
struct FollowUp {
    repair: bool,
    reconcile: bool,
}

/// A storage write the lane resolved from a queued [`Write`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Call {
    /// `trip_open`, fenced or not.
    Trip(Option<u64>),
    /// `record_probe`.
    Record(crate::state::Outcome),
    /// `restore` over `expected`.
    Restore { expected: u64, state: SharedState },
}

impl Inner {
    /// Caches a newer shared view (R15.6a: never an older one, R17.3: an
    /// identical one changes nothing); a newer shared CLOSED after a shared
    /// OPEN or HALF_OPEN resets a local OPEN or HALF_OPEN machine, silently
    /// (R15.6). An answer that shows the storage went backwards is queued
    /// for repair (R15.11). Nothing is adopted after shutdown (R15.10).
    pub(crate) fn adopt(&self, view: SharedState, issued: Option<u64>) {
        if self.shut_down.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let now = self.clock.now();
        let (follow, effects) = self.change(|core| {
            let Some(cell) = core.shared.as_mut() else {
                return (FollowUp::default(), None);
            };
            let mut reset = None;
            match judge(cell.view, &view, issued) {
                Judgement::Regressed => {
                    let first = cell.liveness.repair_from.is_none();
                    if first {
                        cell.liveness.repair_from = Some(view.version);
                    }
                    return (
                        FollowUp {
                            repair: first,
                            reconcile: false,
                        },
                        None,
                    );
                }
                Judgement::Stale | Judgement::Same => {}
                Judgement::Adopt => {
                    let previous = cell.view.replace(view);
                    let live = &mut cell.liveness;
                    let since = match live.full_since {
                        Some((v, since)) if v == view.version => since,
                        _ => now,
                    };
                    live.full_since = view.no_slot_left().then_some((view.version, since));
                    let newer_close = view.state == State::Closed
                        && previous.is_some_and(|p| {
                            matches!(p.state, State::Open | State::HalfOpen)
                                && view.version > p.version
                        });
                    if newer_close && matches!(core.machine.state(), State::Open | State::HalfOpen)
                    {
                        reset = core.machine.reset();
                    }
                }
            }
            let reconcile = Self::needs_reconcile(core);
            if let Some(cell) = core.shared.as_mut() {
                cell.liveness.reconcile_queued |= reconcile;
            }
            (
                FollowUp {
                    repair: false,
                    reconcile,
                },
                reset,
            )
        });
        self.after(effects);
        if follow.repair {
            self.enqueue(Write::Repair);
        }
        if follow.reconcile {
            self.enqueue(Write::Reconcile);
        }
    }

    /// Adopts a record a storage pushed with its change notice
    /// ([`Notice::Written`](crate::storage::Notice::Written)): like a
    /// read's answer, only if newer (R15.6a); never a sign of recovery or
    /// of regression (nothing was asked).
    pub(crate) fn adopt_pushed(&self, state: SharedState) {
        if state.version <= SharedState::MAX_VERSION {
            self.adopt(state, None);
        }
    }

    /// Whether a reconciliation should be queued now (R15.12): the local
    /// machine is in an OPEN the fleet missed (its trip or re-open was
    /// dropped or failed while the storage was down), the healthy shared
    /// view is CLOSED, and none is queued yet. Clears the mark once it is
    /// moot: the fleet shows OPEN or HALF_OPEN, or the local OPEN ended.
    fn needs_reconcile(core: &mut super::Core) -> bool {
        let local = core.machine.state();
        let Some(cell) = core.shared.as_mut() else {
            return false;
        };
        let live = &mut cell.liveness;
        if cell.view.is_some_and(|v| v.state != State::Closed)
            || !matches!(local, State::Open | State::HalfOpen)
        {
            live.unshared_open = false;
        }
        live.unshared_open
            && local == State::Open
            && !cell.degraded
            && !live.reconcile_queued
            && live.repair_from.is_none()
            && cell.view.is_some_and(|v| v.state == State::Closed)
    }

    /// The local machine entered OPEN from `from` (called after the
    /// transition): remember that the fleet has not been told (R15.12). A
    /// trip is written at once (R15.4); a re-open is reconciled at once
    /// when the shared view is a healthy CLOSED, else on recovery.
    pub(super) fn local_opened(&self, from: State) {
        let mut core = self.core();
        if let Some(cell) = core.shared.as_mut() {
            cell.liveness.unshared_open = true;
        }
        let reconcile = from != State::Closed && Self::needs_reconcile(&mut core);
        if let Some(cell) = core.shared.as_mut() {
            cell.liveness.reconcile_queued |= reconcile;
        }
        drop(core);
        if reconcile {
            self.enqueue(Write::Reconcile);
        }
    }

    /// Resolves a queued write into a storage call, at the moment the lane
    /// runs it: `None` when there is nothing (left) to do.
    pub(super) fn resolve(&self, write: Write) -> Option<Call> {
        match write {
            Write::Trip => Some(Call::Trip(None)),
            Write::Probe(outcome) => Some(Call::Record(outcome)),
            Write::Reconcile => {
                let mut core = self.core();
                if let Some(cell) = core.shared.as_mut() {
                    cell.liveness.reconcile_queued = false;
                }
                if !Self::needs_reconcile(&mut core) {
                    return None;
                }
                // Fenced by the CLOSED view it answers: a newer write wins.
                let view = core.shared.as_ref()?.view?;
                Some(Call::Trip(Some(view.version)))
            }
            Write::Repair => {
                let mut core = self.core();
                let local = core.machine.state();
                let cell = core.shared.as_mut()?;
                let expected = cell.liveness.repair_from.take()?;
                let cached = cell.view?;
                let open_now = cell.liveness.unshared_open && local == State::Open;
                Some(Call::Restore {
                    expected,
                    state: repair_target(&cached, open_now),
                })
            }
        }
    }

    /// The stalled shared round to restart now, if any (R17.10): the
    /// cached view is HALF_OPEN with no slot left, at a version first seen
    /// at least [`stall_bound`] ago. Returns that version (the fence) and
    /// starts the bound over, so a restart that changed nothing is not
    /// retried before another whole bound.
    pub(crate) fn stalled_round(&self, now: Timestamp) -> Option<u64> {
        let bound = stall_bound(&self.config);
        let mut core = self.core();
        let cell = core.shared.as_mut()?;
        let view = cell.view?;
        let (version, since) = cell.liveness.full_since?;
        if cell.degraded || version != view.version || !view.no_slot_left() {
            return None;
        }
        if now.saturating_duration_since(since) < bound {
            return None;
        }
        cell.liveness.full_since = Some((version, now));
        Some(version)
    }

    /// Whether the cached shared HALF_OPEN round has no slot left: a lease
    /// would be refused, so the call is rejected here without asking the
    /// storage, until a newer version arrives by notice or poll (R15.2a).
    pub(super) fn round_spent(&self) -> bool {
        self.core()
            .shared
            .as_ref()
            .and_then(|c| c.view)
            .is_some_and(|v| v.no_slot_left())
    }

    /// A poll has read this breaker: remember the version of the view it
    /// left (R17.12).
    pub(crate) fn mark_polled(&self) {
        let mut core = self.core();
        if let Some(cell) = core.shared.as_mut() {
            cell.liveness.polled = cell.view.map(|v| v.version);
        }
    }

    /// Whether a change poll may skip reading this breaker when its record
    /// did not change (R17.12): healthy, with a view that a poll read, no
    /// repair pending.
    pub(crate) fn poll_may_skip(&self) -> bool {
        let core = self.core();
        core.shared.as_ref().is_some_and(|cell| {
            !cell.degraded
                && cell.liveness.repair_from.is_none()
                && cell
                    .view
                    .is_some_and(|v| cell.liveness.polled == Some(v.version))
        })
    }

    /// A change poll planned at `sent` (this breaker's clock) answered with
    /// an epoch read at `backend` (the storage's clock, R17.13).
    pub(crate) fn anchor_poll(&self, sent: Timestamp, backend: Timestamp) {
        let mut core = self.core();
        if let Some(cell) = core.shared.as_mut() {
            cell.liveness.poll_anchor = Some((sent, backend));
        }
    }

    /// The version a change poll may ask the storage to vouch for instead
    /// of reading the record (R17.12, [`PollRequest::ReadUnlessAt`]): the
    /// cached view's, when healthy and no repair is pending.
    ///
    /// [`PollRequest::ReadUnlessAt`]: crate::storage::PollRequest::ReadUnlessAt
    pub(crate) fn poll_may_vouch(&self) -> Option<u64> {
        let core = self.core();
        let cell = core.shared.as_ref()?;
        if cell.degraded || cell.liveness.repair_from.is_some() {
            return None;
        }
        cell.view.map(|v| v.version)
    }

    /// The storage vouched that its record is the one the write of
    /// `version` left: as good as a poll reading it, if the view is still
    /// at that version (R17.12).
    pub(crate) fn mark_vouched(&self, version: u64) {
        let mut core = self.core();
        if let Some(cell) = core.shared.as_mut()
            && cell.view.is_some_and(|v| v.version == version)
        {
            cell.liveness.polled = Some(version);
        }
    }

    /// Whether a change poll may leave out the begin of the cached shared
    /// OPEN (R17.13): healthy, no repair pending, and by the storage's
    /// clock as the last change poll read it, plus the time since on this
    /// breaker's clock, plus two poll intervals, the wait has not ended,
    /// and the OPEN is not from the storage's future (which a begin clamps,
    /// R16.3a). The estimate runs ahead of the storage's clock (the poll was planned
    /// before the storage read its clock), so a begin is never sent later
    /// than at the first poll after the wait ends; the two intervals absorb
    /// a breaker clock that does not move with the storage's.
    pub(crate) fn begin_not_due(&self, now: Timestamp, poll_interval: Duration) -> bool {
        let core = self.core();
        let Some(cell) = core.shared.as_ref() else {
            return false;
        };
        let (Some(view), Some((sent, backend))) = (cell.view, cell.liveness.poll_anchor) else {
            return false;
        };
        if cell.degraded || cell.liveness.repair_from.is_some() || view.state != State::Open {
            return false;
        }
        let backend_now = backend.saturating_add(now.saturating_duration_since(sent));
        // An OPEN from the storage's future (its clock stepped back, a
        // foreign writer): the begin clamps it to now (R16.3a), at once.
        if view.opened_at > backend_now {
            return false;
        }
        let ends = view
            .opened_at
            .saturating_add(self.config.wait_duration_in_open());
        backend_now.saturating_add(poll_interval.saturating_mul(2)) < ends
    }

    /// Tells this breaker's listeners that the storage's change notices are
    /// unavailable (R17.11).
    pub(crate) fn notices_unavailable(&self, reason: &str) {
        self.emit(&Event::StorageNoticesUnavailable {
            breaker: self.name(),
            reason,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(state: State, version: u64) -> SharedState {
        SharedState {
            state,
            version,
            ..SharedState::closed()
        }
    }

    #[test]
    fn r15_6a_answers_are_judged_by_version_and_by_what_was_known_when_asked() {
        let cached = Some(view(State::Closed, 5));
        assert_eq!(judge(None, &view(State::Open, 1), None), Judgement::Adopt);
        assert_eq!(
            judge(cached, &view(State::Closed, 5), Some(5)),
            Judgement::Same
        );
        assert_eq!(
            judge(cached, &view(State::Open, 6), Some(5)),
            Judgement::Adopt
        );
        // Sent at v3, overtaken in flight by v5: stale, not a regression.
        assert_eq!(
            judge(cached, &view(State::Open, 4), Some(3)),
            Judgement::Stale
        );
        assert_eq!(judge(cached, &view(State::Open, 4), None), Judgement::Stale);
        // Sent at v5, answered v1 or absent: the storage went backwards.
        assert_eq!(
            judge(cached, &view(State::Open, 1), Some(5)),
            Judgement::Regressed
        );
        assert_eq!(
            judge(cached, &SharedState::closed(), Some(5)),
            Judgement::Regressed
        );
        // Two different records at one version: the history forked.
        assert_eq!(
            judge(cached, &view(State::Open, 5), Some(2)),
            Judgement::Regressed
        );
    }

    #[test]
    fn r15_11_a_repair_writes_back_the_newest_state_known() {
        let half = SharedState {
            opened_at: Timestamp::from_secs(7),
            probes_remaining: 1,
            ..view(State::HalfOpen, 9)
        };
        let t = repair_target(&half, false);
        assert_eq!(
            (t.state, t.version, t.opened_at),
            (State::Open, 9, Timestamp::from_secs(7))
        );
        assert_eq!(t.probes_remaining, 0);
        let t = repair_target(&view(State::Closed, 4), true);
        assert_eq!((t.state, t.version), (State::Open, 4));
        assert_eq!(t.opened_at, Timestamp::from_nanos(u64::MAX));
        assert_eq!(
            repair_target(&view(State::Closed, 4), false),
            view(State::Closed, 4)
        );
    }
}
