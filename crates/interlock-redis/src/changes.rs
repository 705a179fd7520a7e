//! The client side of a change poll (issue 29, R16.15), shared by both
//! storages: which requests the `changes` script must answer, how its
//! reply answers the others, and what is left for follow-up calls.

use std::collections::HashMap;

use interlock::Timestamp;
use interlock::storage::{ChangePoll, Epoch, PollRequest, SharedState, StorageError};
use redis::Value;

use crate::error::Error;
use crate::options::Resolved;
use crate::scripts::{ChangesReply, MAX_BATCH};
use crate::trail::Plan;

/// One change poll in progress.
pub(crate) struct Pending<'r, 'a> {
    requests: &'r [PollRequest<'a>],
    since: Option<Epoch>,
    answers: Vec<Option<Result<SharedState, StorageError>>>,
    /// The requests every reply must answer, in order; the first
    /// [`MAX_BATCH`] go with the `changes` call itself.
    must: Vec<usize>,
}

impl<'r, 'a> Pending<'r, 'a> {
    /// Plans a poll of `requests` from `since`: without an epoch every
    /// request must be answered, with one only the reads and begins (a
    /// [`PollRequest::ReadUnlessAt`] goes with them: the script vouches
    /// for its version or reads it).
    pub(crate) fn new(since: Option<Epoch>, requests: &'r [PollRequest<'a>]) -> Self {
        let must = (0..requests.len())
            .filter(|&i| {
                since.is_none() || !matches!(requests[i], PollRequest::ReadIfChanged { .. })
            })
            .collect();
        Pending {
            requests,
            since,
            answers: (0..requests.len()).map(|_| None).collect(),
            must,
        }
    }

    /// The requests the `changes` call answers.
    pub(crate) fn first(&self) -> Vec<PollRequest<'a>> {
        self.must
            .iter()
            .take(MAX_BATCH)
            .map(|&i| self.requests[i])
            .collect()
    }

    /// Takes the `changes` reply in: its answers, and (a delta) the
    /// changed records for the reads it was not asked; returns the epoch
    /// and what is left for follow-up calls of at most [`MAX_BATCH`]
    /// requests each (the reads a full answer did not cover, and any
    /// requests past the first batch).
    pub(crate) fn absorb(
        &mut self,
        layout: &Resolved,
        reply: ChangesReply,
    ) -> (Epoch, Vec<Vec<usize>>) {
        self.layout_notice(layout, reply.notice_error.as_deref());
        let first: Vec<usize> = self.must.iter().take(MAX_BATCH).copied().collect();
        for (i, answer) in first.into_iter().zip(reply.answers) {
            self.answers[i] = answer.map(|a| a.map_err(StorageError::from));
        }
        let mut rest: Vec<usize> = self.must.iter().skip(MAX_BATCH).copied().collect();
        if self.since.is_some() {
            let unasked = (0..self.requests.len())
                .filter(|&i| matches!(self.requests[i], PollRequest::ReadIfChanged { .. }));
            if reply.delta {
                let changed: HashMap<String, Result<SharedState, Value>> = reply
                    .changed
                    .into_iter()
                    .filter_map(|(key, record)| {
                        let rest = key.strip_prefix(layout.prefix.as_bytes())?;
                        Some((layout.layout.name_of(rest)?, record))
                    })
                    .collect();
                for i in unasked {
                    self.answers[i] = changed.get(self.requests[i].name()).map(|r| match r {
                        Ok(state) => Ok(*state),
                        Err(message) => Err(Error::script_item("read", message).into()),
                    });
                }
            } else {
                rest.extend(unasked);
            }
        }
        let chunks = rest.chunks(MAX_BATCH).map(<[usize]>::to_vec).collect();
        (reply.epoch, chunks)
    }

    fn layout_notice(&self, layout: &Resolved, why: Option<&str>) {
        layout.publish_failed(why);
    }

    /// The requests of one follow-up chunk.
    pub(crate) fn chunk(&self, chunk: &[usize]) -> Vec<PollRequest<'a>> {
        chunk.iter().map(|&i| self.requests[i]).collect()
    }

    /// Takes a follow-up chunk's answers in.
    pub(crate) fn settle_chunk(&mut self, layout: &Resolved, chunk: &[usize], reply: ChangesReply) {
        self.layout_notice(layout, reply.notice_error.as_deref());
        for (&i, answer) in chunk.iter().zip(reply.answers) {
            self.answers[i] = answer.map(|a| a.map_err(StorageError::from));
        }
    }

    /// The finished poll.
    pub(crate) fn finish(self, epoch: Epoch) -> ChangePoll {
        ChangePoll {
            epoch: Some(epoch),
            answers: self.answers,
        }
    }
}

/// The poll of `count` requests the server confirmed at `at` for `plan`:
/// every request unanswered (a `ReadIfChanged` unchanged, a `ReadUnlessAt`
/// vouched for), at the trail's last epoch.
pub(crate) fn confirmed(plan: Plan, at: Timestamp, count: usize) -> ChangePoll {
    ChangePoll {
        epoch: Some(Epoch { at, ..plan.epoch }),
        answers: (0..count).map(|_| None).collect(),
    }
}
