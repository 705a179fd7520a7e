//! The rules of change polls (issue 29):
//! [`Storage::poll_changes`](crate::storage::Storage::poll_changes)
//! (R16.15). They check safety only: an answer the storage gives must be
//! current, and nothing that changed may be left unanswered. Whether an
//! unchanged record is skipped is the storage's business (the storage
//! tests measure it); a storage that keeps no index passes by answering
//! everything.

use super::*;

/// The answers of `poll`, checked to be one per request; `None` stays
/// `None`, an error is a violation.
fn answers<T: Subject>(
    cx: &Cx<'_, T>,
    poll: ChangePoll,
    requests: &[PollRequest<'_>],
) -> Vec<Option<SharedState>> {
    expect_eq!(
        cx,
        poll.answers.len(),
        requests.len(),
        "poll_changes must give one entry per request, in order"
    );
    poll.answers
        .into_iter()
        .map(|a| a.map(|a| cx.ok("poll_changes (one answer)", a)))
        .collect()
}

/// Checks that every request of `requests` answered in `got` is
/// answered with `want` (the record read right after), and that the
/// `must` ones are answered at all.
fn expect_current<T: Subject>(
    cx: &Cx<'_, T>,
    requests: &[PollRequest<'_>],
    got: &[Option<SharedState>],
    want: &[SharedState],
    must: &[bool],
    when: &str,
) {
    for (i, request) in requests.iter().enumerate() {
        match got[i] {
            None if must[i] => violated!(
                cx,
                "{when}: {request:?} was left unanswered, but its record changed (or it is not \
                 a ReadIfChanged)"
            ),
            None => {}
            Some(answer) => expect_eq!(cx, answer, want[i], "{when}: the answer to {request:?}"),
        }
    }
}

pub(in crate::store::contract) async fn poll_changes_without_a_known_epoch_reads_everything<
    T: Subject,
>(
    s: &T,
    t: &dyn StorageTime,
) {
    let cx = Cx::new(
        s,
        t,
        "R16.15 poll_changes_without_a_known_epoch_reads_everything",
    );
    let (absent, open, due, closed) = (cx.name(), cx.name(), cx.name(), cx.name());
    let open_v = cx.trip(&open, None).await;
    cx.trip(&due, None).await;
    let closed_v = cx.close(&closed, None).await;
    cx.pass(1);
    let foreign = Epoch {
        counter: 1 << 52,
        mark: 0x5eed_1e55_c0ff_ee00,
        at: crate::clock::Timestamp::from_secs(1),
    };
    for (round, since) in [None, Some(foreign)].into_iter().enumerate() {
        let begin = PollRequest::BeginHalfOpen {
            name: &due,
            wait: Duration::ZERO,
            permitted: 2,
            ttl: cx.ttl,
        };
        let requests = [
            PollRequest::ReadIfChanged { name: &absent },
            PollRequest::ReadIfChanged { name: &open },
            PollRequest::Read { name: &closed },
            begin,
        ];
        let poll = cx.ok("poll_changes", s.poll_changes(since, &requests).await);
        let got = answers(&cx, poll, &requests);
        let due_now = cx.present(&due, "after a begin whose wait elapsed").await;
        expect_eq!(
            cx,
            due_now.state,
            State::HalfOpen,
            "poll_changes must apply a begin whose wait elapsed (round {round})"
        );
        let want = [SharedState::closed(), open_v, closed_v, due_now];
        let when = if since.is_none() {
            "without an epoch"
        } else {
            "from an epoch the storage never returned"
        };
        expect_current(&cx, &requests, &got, &want, &[true; 4], when);
        cx.absent(&absent, "after a change poll read it").await;
    }
}

pub(in crate::store::contract) async fn poll_changes_never_skips_a_change<T: Subject>(
    s: &T,
    t: &dyn StorageTime,
) {
    let cx = Cx::new(s, t, "R16.15 poll_changes_never_skips_a_change");
    let short = cx.short_ttl();
    let names: Vec<String> = (0..12).map(|_| cx.name()).collect();
    let [
        untouched,
        tripped,
        closed,
        begun,
        leased,
        recorded,
        restarted,
        restored,
        expiring,
        noop,
        polled_begin,
        never,
    ] = names.iter().map(String::as_str).collect::<Vec<_>>()[..]
    else {
        unreachable!("twelve names")
    };
    // Before the epoch.
    cx.close(untouched, None).await;
    cx.close(tripped, None).await;
    cx.trip(closed, None).await;
    cx.trip(begun, None).await;
    cx.half_open(leased, 2).await;
    cx.half_open(recorded, 2).await;
    cx.half_open(restarted, 1).await;
    let spent = cx.lease(restarted).await.state;
    cx.trip(restored, None).await;
    short.trip(expiring, None).await;
    cx.trip(noop, None).await;
    cx.trip(polled_begin, None).await;
    let all: Vec<PollRequest<'_>> = names
        .iter()
        .map(|name| PollRequest::ReadIfChanged { name })
        .collect();
    let first = cx.ok("poll_changes", s.poll_changes(None, &all).await);
    let Some(epoch) = first.epoch else {
        // No change index: every poll is a full read, checked above.
        return;
    };
    answers(&cx, first, &all);

    // After it: one change of each kind, and no-ops.
    cx.trip(tripped, None).await;
    cx.close(closed, None).await;
    cx.begin(begun, Duration::ZERO, 2).await;
    cx.lease(leased).await;
    cx.record(recorded, Outcome::Failure).await;
    cx.restart(restarted, spent.version, 1).await;
    cx.restore(restored, 1, SharedState::closed()).await;
    cx.trip(noop, None).await; // already OPEN: no change
    cx.begin(noop, cx.ticks(1000), 2).await; // not elapsed: no change
    cx.lease(untouched).await; // denied: no change
    cx.pass_beyond(SHORT_TTL_TICKS);

    let mut requests = all.clone();
    requests[10] = PollRequest::BeginHalfOpen {
        name: polled_begin,
        wait: Duration::ZERO,
        permitted: 1,
        ttl: cx.ttl,
    };
    requests[11] = PollRequest::Read { name: never };
    let poll = cx.ok("poll_changes", s.poll_changes(Some(epoch), &requests).await);
    let next = poll.epoch;
    let got = answers(&cx, poll, &requests);
    let mut want = Vec::new();
    for name in &names {
        want.push(cx.read(name).await.unwrap_or_else(SharedState::closed));
    }
    expect_eq!(
        cx,
        want[10].state,
        State::HalfOpen,
        "a begin in a change poll must be applied"
    );
    let mut must = [true; 12];
    must[0] = false; // untouched
    must[9] = false; // no-ops only
    expect_current(
        &cx,
        &requests,
        &got,
        &want,
        &must,
        "from the epoch of the previous poll",
    );

    // The epoch it returned misses nothing either: the begin it applied
    // itself, and a change after it.
    let Some(next) = next else {
        violated!(
            cx,
            "poll_changes returned an epoch once, then none: a storage with a change index \
             returns one with every answer"
        )
    };
    cx.trip(untouched, None).await;
    let poll = cx.ok("poll_changes", s.poll_changes(Some(next), &all).await);
    let got = answers(&cx, poll, &all);
    let mut want = Vec::new();
    for name in &names {
        want.push(cx.read(name).await.unwrap_or_else(SharedState::closed));
    }
    let mut must = [false; 12];
    must[0] = true; // tripped after the epoch
    expect_current(&cx, &all, &got, &want, &must, "from the epoch it returned");
    if let Some(Some(answer)) = got.get(10)
        && answer.state != State::HalfOpen
    {
        violated!(
            cx,
            "the begin applied by the previous poll was lost: {answer:?}"
        );
    }
}

pub(in crate::store::contract) async fn poll_changes_vouches_only_for_the_version_it_holds<
    T: Subject,
>(
    s: &T,
    t: &dyn StorageTime,
) {
    let cx = Cx::new(
        s,
        t,
        "R16.15 poll_changes_vouches_only_for_the_version_it_holds",
    );
    let short = cx.short_ttl();
    let names: Vec<String> = (0..6).map(|_| cx.name()).collect();
    let [current, stale, twice, expiring, before, _absent] =
        names.iter().map(String::as_str).collect::<Vec<_>>()[..]
    else {
        unreachable!("six names")
    };
    let before_v = cx.close(before, None).await;
    let stale_v = cx.close(stale, None).await;
    cx.close(twice, None).await;
    // Without an epoch a ReadUnlessAt is a read, whatever its version.
    let unknown: Vec<PollRequest<'_>> = names
        .iter()
        .map(|name| PollRequest::ReadUnlessAt { name, version: 1 })
        .collect();
    let first = cx.ok("poll_changes", s.poll_changes(None, &unknown).await);
    let epoch = first.epoch;
    let got = answers(&cx, first, &unknown);
    let mut want = Vec::new();
    for name in &names {
        want.push(cx.read(name).await.unwrap_or_else(SharedState::closed));
    }
    for (i, request) in unknown.iter().enumerate() {
        match got[i] {
            None => violated!(
                cx,
                "without an epoch {request:?} was left unanswered: every request is read"
            ),
            Some(answer) => expect_eq!(cx, answer, want[i], "the answer to {request:?}"),
        }
    }
    let Some(epoch) = epoch else {
        // No change index: every poll is a full read, checked above.
        return;
    };

    // After the epoch: `current` written once, `stale` written but asked
    // at its older version, `twice` written twice and asked at the first
    // of them, `expiring` written and then expired; `before` unchanged,
    // `absent` never written.
    let current_v = cx.trip(current, None).await;
    cx.trip(stale, None).await;
    let twice_first = cx.trip(twice, None).await;
    cx.close(twice, None).await;
    let expiring_v = short.trip(expiring, None).await;
    cx.pass_beyond(SHORT_TTL_TICKS);
    let asked = [
        current_v.version,
        stale_v.version,
        twice_first.version,
        expiring_v.version,
        before_v.version,
        3,
    ];
    let requests: Vec<PollRequest<'_>> = names
        .iter()
        .zip(asked)
        .map(|(name, version)| PollRequest::ReadUnlessAt { name, version })
        .collect();
    let poll = cx.ok("poll_changes", s.poll_changes(Some(epoch), &requests).await);
    let got = answers(&cx, poll, &requests);
    let mut want = Vec::new();
    for name in &names {
        want.push(cx.read(name).await.unwrap_or_else(SharedState::closed));
    }
    for (i, request) in requests.iter().enumerate() {
        match got[i] {
            // An unanswered ReadUnlessAt promises the record is at its version.
            None if want[i].version != asked[i] || want[i] == SharedState::closed() => violated!(
                cx,
                "{request:?} was left unanswered, but the record is {:?}",
                want[i]
            ),
            None => {}
            Some(answer) => expect_eq!(cx, answer, want[i], "the answer to {request:?}"),
        }
    }
}
