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
    /// The requests of a poll; with `changes` (the lane has an epoch), a
    /// read of a breaker a poll already read and nothing else changed
    /// since is a [`PollRequest::ReadIfChanged`] (R17.12).
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
                if let PollRequest::Read { name } = request
                    && changes
                    && breaker.poll_may_skip()
                {
                    request = PollRequest::ReadIfChanged { name };
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
                for ((breaker, now, issued), answer) in self.asked.into_iter().zip(poll.answers) {
                    if let Some(answer) = answer
                        && breaker.settle_answer(answer, now, issued).is_some()
                    {
                        breaker.mark_polled();
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
