//! The lane's worker: a blocking thread or an async task that runs the
//! queued writes, the polls and the notices, and its revival after `fork()`.

use super::*;

impl background::Revive for Lane {
    /// A blocking lane whose worker was started in another process starts
    /// one here (an async lane waits for its next attach, write or close:
    /// it needs this process's runtime, from a task of it).
    fn revive(&self) {
        if !matches!(self.backend, Backend::Blocking(_)) {
            return;
        }
        let Ok(st) = self.state.try_lock() else {
            return;
        };
        let moved = st.running && !st.owner.is_some_and(Owner::is_here);
        drop(st);
        if moved {
            if let Some(me) = self.me.upgrade() {
                me.ensure_running_here();
            }
        }
    }
}

/// The blocking lane: wait up to `poll_interval` for a write; run writes as
/// they come; poll when the interval is up (R17.1). Exits once nothing
/// holds the lane any more.
///
/// `next_poll` is `None` when the interval reaches past any representable
/// instant (`Duration::MAX`: never poll on a timer, only on notices and
/// writes). A panic out of one round (storage calls and listeners are
/// already isolated) is caught, so the lane keeps serving every breaker.
pub(super) fn run_blocking(weak: &Weak<Lane>) {
    let mut next_poll = Some(real_now());
    loop {
        let Some(lane) = weak.upgrade() else { return };
        let interval = lane.settings.poll_interval();
        {
            let mut st = lane.state();
            loop {
                if st.has_work() {
                    break;
                }
                let now = real_now();
                st = match next_poll {
                    Some(at) if now >= at => break,
                    Some(at) => {
                        lane.wake
                            .wait_timeout(st, at - now)
                            .unwrap_or_else(PoisonError::into_inner)
                            .0
                    }
                    None => lane.wake.wait(st).unwrap_or_else(PoisonError::into_inner),
                };
            }
        }
        crate::event::isolate(|| {
            lane.run_queue_blocking();
            lane.run_refreshes_blocking();
            if next_poll.is_some_and(|at| real_now() >= at) {
                lane.poll_blocking();
                next_poll = real_now().checked_add(interval);
            }
        });
        if Arc::strong_count(&lane) == 1 && lane.state().members.is_empty() {
            return;
        }
    }
}

#[cfg(feature = "tokio")]
pub(super) async fn run_async(weak: Weak<Lane>) {
    // `None`: never poll on a timer (see `run_blocking`).
    let mut next_poll = Some(tokio::time::Instant::now());
    loop {
        let Some(lane) = weak.upgrade() else { return };
        let interval = lane.settings.poll_interval();
        if !lane.state().has_work() {
            match next_poll {
                Some(at) if tokio::time::Instant::now() < at => {
                    let _ = tokio::time::timeout_at(at, lane.notify.notified()).await;
                }
                Some(_) => {}
                None => lane.notify.notified().await,
            }
        }
        isolated(async {
            lane.run_queue_async().await;
            lane.run_refreshes_async().await;
            if next_poll.is_some_and(|at| tokio::time::Instant::now() >= at) {
                lane.poll_async().await;
                next_poll = tokio::time::Instant::now().checked_add(interval);
            }
        })
        .await;
        if Arc::strong_count(&lane) == 1 && lane.state().members.is_empty() {
            return;
        }
    }
}
