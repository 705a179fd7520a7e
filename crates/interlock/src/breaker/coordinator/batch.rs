//! One batched poll: which breakers were asked about, and handing each its
//! answer.

use super::*;

/// One batched poll: the breakers asked about, when, and what.
pub(super) struct Batch<'a> {
    /// Each breaker asked, when, and its cached version then.
    pub(super) asked: Vec<(&'a Inner, Timestamp, Option<u64>)>,
    pub(super) requests: Vec<PollRequest<'a>>,
}

impl<'a> Batch<'a> {
    /// The requests of a poll. With `changes` (the lane has an epoch): a
    /// read of a breaker a poll already read is a
    /// [`PollRequest::ReadIfChanged`], a read of a healthy view from
    /// anything else (a notice, a write's answer) a
    /// [`PollRequest::ReadUnlessAt`] its version (R17.12), and the begin of
    /// a cached OPEN whose wait cannot have ended is left out: the breaker
    /// is read as if it were not OPEN (R17.13).
    pub(super) fn plan(
        members: &'a [Arc<Inner>],
        settings: &StorageSettings,
        changes: bool,
    ) -> Self {
        let mut batch = Batch {
            asked: Vec::with_capacity(members.len()),
            requests: Vec::with_capacity(members.len()),
        };
        for breaker in members {
            let now = breaker.now();
            if let Some(mut request) = breaker.poll_request(now, settings) {
                if let PollRequest::BeginHalfOpen { name, .. } = request
                    && changes
                    && breaker.begin_not_due(now, settings.poll_interval())
                {
                    request = PollRequest::Read { name };
                }
                if let PollRequest::Read { name } = request
                    && changes
                {
                    if breaker.poll_may_skip() {
                        request = PollRequest::ReadIfChanged { name };
                    } else if let Some(version) = breaker.poll_may_vouch() {
                        request = PollRequest::ReadUnlessAt { name, version };
                    }
                }
                batch.asked.push((breaker, now, breaker.shared_version()));
                batch.requests.push(request);
            }
        }
        batch
    }

    /// Hands each breaker its answer (an unanswered one keeps its view); a
    /// failed batch (or a storage that answered the wrong number of
    /// requests) degrades every breaker asked. Returns the epoch to poll
    /// from next when the storage answered.
    pub(super) fn settle(self, answers: Result<ChangePoll, StorageError>) -> Option<Option<Epoch>> {
        let answers = answers.and_then(|a| {
            if a.answers.len() == self.asked.len() {
                Ok(a)
            } else {
                Err(Box::new(WrongAnswerCount {
                    asked: self.asked.len(),
                    answered: a.answers.len(),
                }) as StorageError)
            }
        });
        match answers {
            Ok(poll) => {
                let asked = self.asked.into_iter().zip(&self.requests);
                for (((breaker, now, issued), request), answer) in asked.zip(poll.answers) {
                    if let Some(epoch) = poll.epoch {
                        breaker.anchor_poll(now, epoch.at);
                    }
                    match (answer, request) {
                        (Some(answer), _) => {
                            if breaker.settle_answer(answer, now, issued).is_some() {
                                breaker.mark_polled();
                            }
                        }
                        (None, PollRequest::ReadUnlessAt { version, .. }) => {
                            breaker.mark_vouched(*version);
                        }
                        (None, _) => {}
                    }
                }
                Some(poll.epoch)
            }
            Err(error) => {
                for (breaker, now, _) in self.asked {
                    breaker.storage_failed(now, &*error);
                }
                None
            }
        }
    }
}

/// A storage's `poll_many` returned a different number of answers than
/// requests: a broken storage, degraded like a failing one.
#[derive(Debug)]
pub(super) struct WrongAnswerCount {
    pub(super) asked: usize,
    answered: usize,
}

impl fmt::Display for WrongAnswerCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the storage answered {} of {} poll requests",
            self.answered, self.asked
        )
    }
}

impl std::error::Error for WrongAnswerCount {}
