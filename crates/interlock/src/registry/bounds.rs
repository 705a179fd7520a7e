//! A registry's bounds (issue 20): removing and retaining names, expiry
//! after idleness and a maximum number of breakers, each evicted breaker's
//! listeners told ([`Event::BreakerRemoved`]).

use super::*;

/// What bounds a registry: idle expiry and a maximum count.
#[derive(Clone, Debug)]
pub(super) struct Bounds {
    /// `expire_after_idle`, in nanoseconds.
    pub(super) idle_nanos: Option<u64>,
    pub(super) max: Option<usize>,
    /// Either of the two: breakers' use is stamped.
    pub(super) tracks: bool,
    /// The registry's clock for stamps and sweeps: the template's, with
    /// the precise clock read as the coarse one (same origin; a registry
    /// hit must stay cheap, and idle times are minutes, not nanoseconds).
    pub(super) clock: ClockHandle,
}

impl Bounds {
    pub(super) fn new(idle: Option<Duration>, max: Option<usize>, clock: &ClockHandle) -> Self {
        let clock = match clock {
            ClockHandle::Auto | ClockHandle::Monotonic => ClockHandle::Coarse,
            chosen => chosen.clone(),
        };
        Bounds {
            idle_nanos: idle.map(duration_to_nanos),
            max,
            tracks: idle.is_some() || max.is_some(),
            clock,
        }
    }
}

/// At most this fraction of `expire_after_idle` between two idle sweeps,
/// so a stream of breakers expiring one by one costs one pass over the
/// registry per 1/1024 of the idle time, not one per breaker.
pub(super) const SWEEP_SPACING_SHIFT: u32 = 10;

/// A registry at its maximum evicts this fraction of it at once (at least
/// one breaker), so that creating names past the bound costs an amortized
/// constant, not a pass over the registry per name.
pub(super) const EVICTION_BATCH_DIVISOR: usize = 32;

/// Tells each removed breaker's listeners, outside the registry's lock.
pub(super) fn notify_removed(removed: &[CircuitBreaker]) {
    for breaker in removed {
        breaker.inner.emit(&Event::breaker_removed(breaker.name()));
    }
}

impl<M: Mode> Registry<M> {
    /// Forgets the breaker named `name` and returns it, or `None` if there
    /// is none. Its listeners receive [`Event::BreakerRemoved`]; handles to
    /// it keep working, and the next [`get`](Self::get) of the name creates
    /// a new breaker.
    ///
    /// ```
    /// use interlock::Registry;
    ///
    /// let registry = Registry::new();
    /// let old = registry.get("api.example.com:443");
    /// let removed = registry.remove("api.example.com:443").expect("it existed");
    /// assert!(removed.ptr_eq(&old));
    /// assert!(registry.get_existing("api.example.com:443").is_none());
    /// assert!(!registry.get("api.example.com:443").ptr_eq(&old)); // a new one
    /// assert!(registry.remove("never-seen").is_none());
    /// ```
    pub fn remove(&self, name: &str) -> Option<CircuitBreaker<M>> {
        let removed = {
            let mut all = self.all();
            let i = *all.index.get(name)?;
            let breaker = self.take(&mut all, i);
            self.settle_removals(&mut all);
            breaker
        };
        notify_removed(std::slice::from_ref(&removed));
        Some(removed.cast())
    }

    /// Keeps only the breakers for which `keep(name, breaker)` is true and
    /// forgets the others, as [`remove`](Self::remove) does. `keep` runs
    /// outside the registry's lock (it may use the registry), on a
    /// point-in-time list; a breaker created meanwhile is kept.
    ///
    /// ```
    /// use interlock::{Registry, State};
    ///
    /// let registry = Registry::new();
    /// for host in ["a.internal:443", "b.internal:443", "c.example.com:443"] {
    ///     let _ = registry.get(host);
    /// }
    /// registry.get("b.internal:443").force_open();
    /// // Forget the external hosts, and internal ones an operator forced open.
    /// registry.retain(|name, breaker| name.ends_with(".internal:443") && breaker.state() != State::ForcedOpen);
    /// assert_eq!(registry.names(), ["a.internal:443"]);
    /// ```
    pub fn retain(&self, mut keep: impl FnMut(&str, &CircuitBreaker<M>) -> bool) {
        let listed: Vec<(Arc<str>, CircuitBreaker<M>)> = self
            .all()
            .entries
            .iter()
            .flatten()
            .map(|e| (Arc::clone(&e.name), e.breaker.clone().cast()))
            .collect();
        let doomed: Vec<_> = listed
            .into_iter()
            .filter(|(name, breaker)| !keep(name, breaker))
            .collect();
        if doomed.is_empty() {
            return;
        }
        let removed = {
            let mut all = self.all();
            let mut removed = Vec::with_capacity(doomed.len());
            for (name, breaker) in &doomed {
                let Some(&i) = all.index.get(&**name) else {
                    continue;
                };
                // Only the breaker `keep` judged: a new one under the same
                // name (created since the listing) stays.
                if all.entries[i]
                    .as_ref()
                    .is_some_and(|e| Arc::ptr_eq(&e.breaker.inner, &breaker.inner))
                {
                    removed.push(self.take(&mut all, i));
                }
            }
            self.settle_removals(&mut all);
            removed
        };
        notify_removed(&removed);
    }

    /// How long a breaker may go unused before the registry forgets it
    /// ([`RegistryBuilder::expire_after_idle`]), if it does.
    #[must_use]
    pub fn expire_after_idle(&self) -> Option<Duration> {
        self.inner.template.idle
    }

    /// How many breakers it holds at most ([`RegistryBuilder::max_breakers`]),
    /// if it is bounded.
    #[must_use]
    pub fn max_breakers(&self) -> Option<usize> {
        self.inner.template.max
    }

    /// Stamps a breaker just handed out as used now, and sweeps idle ones
    /// if one may have expired.
    #[inline]
    pub(super) fn handed_out(&self, breaker: &CircuitBreaker) {
        let now = self.inner.bounds.clock.now();
        breaker.inner.usage.touch(now);
        if now.as_nanos() >= self.inner.next_sweep.load(Ordering::Relaxed) {
            self.sweep(now);
        }
    }

    /// Forgets every breaker idle for `expire_after_idle` at `now`.
    #[cold]
    #[inline(never)]
    pub(super) fn sweep(&self, now: Timestamp) {
        let removed = {
            let mut all = self.all();
            // Another thread may have swept since the caller looked.
            if now.as_nanos() < self.inner.next_sweep.load(Ordering::Relaxed) {
                return;
            }
            let removed = self.expire(&mut all, now);
            self.settle_removals(&mut all);
            removed
        };
        notify_removed(&removed);
    }

    /// Takes the expired breakers out (the lock held) and schedules the
    /// next sweep.
    pub(super) fn expire(&self, all: &mut All, now: Timestamp) -> Vec<CircuitBreaker> {
        let Some(idle) = self.inner.bounds.idle_nanos else {
            return Vec::new();
        };
        let now = now.as_nanos();
        let mut next = u64::MAX;
        let mut doomed = Vec::new();
        for (i, entry) in all.entries.iter().enumerate() {
            let Some(entry) = entry else { continue };
            let last = entry.breaker.inner.usage.last();
            if now.saturating_sub(last) >= idle {
                doomed.push(i);
            } else {
                next = next.min(last.saturating_add(idle));
            }
        }
        let spacing = (idle >> SWEEP_SPACING_SHIFT).max(1);
        if next != u64::MAX {
            next = next.max(now.saturating_add(spacing));
        }
        self.inner.next_sweep.store(next, Ordering::Relaxed);
        doomed.into_iter().map(|i| self.take(all, i)).collect()
    }

    /// Makes room for one more breaker under `max_breakers`: the expired
    /// first, then the least recently used, a batch at a time.
    pub(super) fn make_room(
        &self,
        all: &mut All,
        max: usize,
        now: Timestamp,
    ) -> Vec<CircuitBreaker> {
        let mut removed = self.expire(all, now);
        if all.live < max {
            return removed;
        }
        let batch = (max / EVICTION_BATCH_DIVISOR).max(1).min(all.live);
        // (last use, creation order): ties go to the older breaker.
        let mut by_use: Vec<(u64, usize)> = all
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| Some((e.as_ref()?.breaker.inner.usage.last(), i)))
            .collect();
        if batch < by_use.len() {
            by_use.select_nth_unstable(batch - 1);
            by_use.truncate(batch);
        }
        removed.extend(by_use.into_iter().map(|(_, i)| self.take(all, i)));
        removed
    }

    /// Takes entry `i` out (the lock held).
    pub(super) fn take(&self, all: &mut All, i: usize) -> CircuitBreaker {
        let Some(entry) = all.entries[i].take() else {
            unreachable!("the index points at live entries only")
        };
        all.index.remove(&entry.name);
        all.live -= 1;
        all.changes += 1;
        entry.breaker
    }

    /// After removals: compacts the list once it is mostly holes, and
    /// republishes at once: the published table must not list a removed
    /// breaker (a hit trusts a current table without another check). One
    /// copy of the table per call: evictions come in batches, and
    /// [`retain`](Self::retain) removes many names with one copy.
    pub(super) fn settle_removals(&self, all: &mut All) {
        if all.entries.len() > 2 * all.live + 16 {
            all.entries.retain(Option::is_some);
            let All { entries, index, .. } = all;
            for (i, entry) in entries.iter().flatten().enumerate() {
                if let Some(at) = index.get_mut(&entry.name) {
                    *at = i;
                }
            }
        }
        self.publish(all);
    }
}
