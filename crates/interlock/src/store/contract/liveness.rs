//! The rules of the two liveness operations (issue 21):
//! [`Storage::restart_stalled_round`](crate::storage::Storage::restart_stalled_round)
//! (R16.13) and [`Storage::restore`](crate::storage::Storage::restore)
//! (R16.14), and the version bound (R16.7).

use super::*;

/// A HALF_OPEN round of `permitted` probes whose every slot is leased: the
/// shape of a stalled round. Returns the view after the last lease.
async fn spent_round<T: Subject>(cx: &Cx<'_, T>, name: &str, permitted: u32) -> SharedState {
    let mut view = cx.half_open(name, permitted).await;
    for i in 0..permitted {
        let lease = cx.lease(name).await;
        if !lease.granted {
            violated!(cx, "lease {} of {permitted} was denied", i + 1);
        }
        view = lease.state;
    }
    expect_eq!(
        cx,
        (view.state, view.probes_remaining),
        (State::HalfOpen, 0),
        "after leasing every slot"
    );
    view
}

pub(in crate::store::contract) async fn restart_needs_a_stalled_round_at_the_expected_version<
    T: Subject,
>(
    s: &T,
    t: &dyn StorageTime,
) {
    let cx = Cx::new(
        s,
        t,
        "R16.13 restart_needs_a_stalled_round_at_the_expected_version",
    );

    // Absent: nothing to restart, and no key is created.
    let name = cx.name();
    let v = cx.restart(&name, 0, 2).await;
    expect_eq!(cx, v, SharedState::closed(), "restart of an absent key");
    cx.absent(&name, "after a restart of an absent key").await;

    // CLOSED and OPEN are not rounds.
    let name = cx.name();
    let closed = cx.close(&name, None).await;
    expect_eq!(
        cx,
        cx.restart(&name, closed.version, 2).await,
        closed,
        "restart of CLOSED v1"
    );
    let open = cx.trip(&name, None).await;
    expect_eq!(
        cx,
        cx.restart(&name, open.version, 2).await,
        open,
        "restart of OPEN v2"
    );

    // A round with slots left is not stalled.
    let name = cx.name();
    let half = cx.half_open(&name, 2).await;
    expect_eq!(
        cx,
        cx.restart(&name, half.version, 3).await,
        half,
        "restart of a round with 2 slots left"
    );
    let one = cx.lease(&name).await.state;
    expect_eq!(
        cx,
        cx.restart(&name, one.version, 3).await,
        one,
        "restart of a round with 1 slot left"
    );

    // Every slot leased: stalled. A stale version changes nothing.
    let name = cx.name();
    let spent = spent_round(&cx, &name, 2).await;
    expect_eq!(
        cx,
        cx.restart(&name, spent.version - 1, 3).await,
        spent,
        "restart fenced on the version before the last lease"
    );
    let fresh = cx.restart(&name, spent.version, 3).await;
    let want = SharedState {
        state: State::HalfOpen,
        opened_at: spent.opened_at,
        version: spent.version + 1,
        probes_permitted: 3,
        probes_remaining: 3,
        probes_completed: 0,
        probe_failures: 0,
        probe_slows: 0,
    };
    expect_eq!(
        cx,
        fresh,
        want,
        "restart of a stalled round: a fresh round of the new budget, opened_at kept"
    );
    let read = cx.present(&name, "after an applied restart").await;
    expect_eq!(cx, read, fresh, "read after the restart");
    expect_eq!(
        cx,
        cx.restart(&name, spent.version, 3).await,
        fresh,
        "a second restart fenced on the old version"
    );

    // A round whose outcomes are all in but whose decision was lost is
    // stalled too.
    let name = cx.name();
    let spent = spent_round(&cx, &name, 1).await;
    let finished = cx.record(&name, Outcome::Failure).await;
    expect_eq!(
        cx,
        (finished.probes_completed, finished.version),
        (1, spent.version + 1),
        "the only probe's outcome"
    );
    let fresh = cx.restart(&name, finished.version, 1).await;
    expect_eq!(
        cx,
        (fresh.state, fresh.version, probes(&fresh)),
        (State::HalfOpen, finished.version + 1, (1, 1, 0, 0, 0)),
        "restart of a finished round whose decision never came"
    );
}

pub(in crate::store::contract) async fn restart_and_restore_refresh_ttl_only_when_applied<
    T: Subject,
>(
    s: &T,
    t: &dyn StorageTime,
) {
    let cx = Cx::new(
        s,
        t,
        "R16.13 restart_and_restore_refresh_ttl_only_when_applied",
    )
    .short_ttl();
    let restarted = cx.name();
    let fenced_restart = cx.name();
    let restored = cx.name();
    let fenced_restore = cx.name();
    let spent = spent_round(&cx, &restarted, 1).await;
    let other = spent_round(&cx, &fenced_restart, 1).await;
    let a = cx.trip(&restored, None).await;
    let b = cx.trip(&fenced_restore, None).await;
    cx.pass(6);
    cx.restart(&restarted, spent.version, 1).await;
    cx.restart(&fenced_restart, other.version + 5, 1).await;
    cx.restore(&restored, a.version, SharedState::closed())
        .await;
    cx.restore(&fenced_restore, b.version + 5, SharedState::closed())
        .await;
    cx.pass_beyond(4); // 10 ticks after the first writes, 4 after the others
    cx.absent(
        &fenced_restart,
        "10 ticks after its last lease with a 10-tick TTL (a fenced-out restart must not \
         refresh the TTL)",
    )
    .await;
    cx.absent(
        &fenced_restore,
        "10 ticks after its trip with a 10-tick TTL (a fenced-out restore must not refresh \
         the TTL)",
    )
    .await;
    cx.present(
        &restarted,
        "4 ticks after an applied restart with a 10-tick TTL (it must refresh the TTL)",
    )
    .await;
    cx.present(
        &restored,
        "4 ticks after an applied restore with a 10-tick TTL (it must refresh the TTL)",
    )
    .await;
}

pub(in crate::store::contract) async fn restore_is_fenced_and_lifts_the_version<T: Subject>(
    s: &T,
    t: &dyn StorageTime,
) {
    let cx = Cx::new(s, t, "R16.14 restore_is_fenced_and_lifts_the_version");
    let opened = cx.trip(&cx.name(), None).await.opened_at;
    let name = cx.name();
    let open = |version| SharedState {
        state: State::Open,
        opened_at: opened,
        version,
        ..SharedState::closed()
    };

    // Absent (version 0): fenced on anything else, applied on 0.
    let v = cx.restore(&name, 1, open(7)).await;
    expect_eq!(
        cx,
        v,
        SharedState::closed(),
        "restore(expected 1) of an absent key"
    );
    cx.absent(&name, "after a fenced-out restore of an absent key")
        .await;
    let v = cx.restore(&name, 0, open(7)).await;
    expect_eq!(
        cx,
        v,
        open(8),
        "restore(expected 0) of OPEN v7 over an absent key: lifted to v8"
    );
    expect_eq!(
        cx,
        cx.present(&name, "after an applied restore").await,
        v,
        "read after the restore"
    );

    // A lower version in the state: the stored one is lifted instead.
    let v = cx
        .restore(
            &name,
            8,
            SharedState {
                version: 3,
                ..SharedState::closed()
            },
        )
        .await;
    expect_eq!(
        cx,
        v,
        SharedState {
            version: 9,
            ..SharedState::closed()
        },
        "restore(expected 8) of CLOSED v3: max(8, 3) + 1"
    );

    // Probe fields are written as given.
    let half = SharedState {
        state: State::HalfOpen,
        opened_at: opened,
        version: 0,
        probes_permitted: 3,
        probes_remaining: 1,
        probes_completed: 2,
        probe_failures: 1,
        probe_slows: 1,
    };
    let v = cx.restore(&name, 9, half).await;
    expect_eq!(
        cx,
        v,
        SharedState {
            version: 10,
            ..half
        },
        "restore(expected 9) of a HALF_OPEN round"
    );

    // Fenced: stale or future expected versions write nothing.
    for expected in [0, 9, 11] {
        let v = cx.restore(&name, expected, open(50)).await;
        expect_eq!(
            cx,
            v.version,
            10,
            "restore(expected {expected}) against v10 must write nothing"
        );
    }
    // The restored round is a round like any other.
    let lease = cx.lease(&name).await;
    expect_eq!(
        cx,
        (
            lease.granted,
            lease.state.version,
            lease.state.probes_remaining
        ),
        (true, 11, 0),
        "a lease from the restored round"
    );
}

pub(in crate::store::contract) async fn restore_clamps_opened_at_to_the_storage_clock<
    T: Subject,
>(
    s: &T,
    t: &dyn StorageTime,
) {
    let cx = Cx::new(s, t, "R16.14 restore_clamps_opened_at_to_the_storage_clock");
    let before = cx.trip(&cx.name(), None).await.opened_at;
    let name = cx.name();
    let future = SharedState {
        state: State::Open,
        opened_at: crate::clock::Timestamp::from_nanos(u64::MAX),
        version: 4,
        ..SharedState::closed()
    };
    let v = cx.restore(&name, 0, future).await;
    let after = cx.trip(&cx.name(), None).await.opened_at;
    if v.opened_at < before || v.opened_at > after {
        violated!(
            cx,
            "restore of an OPEN that began in the future must clamp opened_at to the storage's \
             now: got {:?}, expected between {before:?} and {after:?}",
            v.opened_at
        );
    }
    expect_eq!(
        cx,
        (v.state, v.version),
        (State::Open, 5),
        "the clamped OPEN"
    );

    // A past opened_at is kept, and the OPEN wait counts from it.
    let name = cx.name();
    let v = cx
        .restore(
            &name,
            0,
            SharedState {
                opened_at: before,
                ..future
            },
        )
        .await;
    expect_eq!(
        cx,
        v.opened_at,
        before,
        "restore of an OPEN since a past time"
    );
    cx.pass(1);
    let begun = cx.begin(&name, cx.ticks(1), 2).await;
    expect_eq!(
        cx,
        begun.state,
        State::HalfOpen,
        "begin_half_open_if_elapsed(wait 1 tick) a tick after the restored opened_at"
    );

    // CLOSED writes no opened_at.
    let name = cx.name();
    let v = cx
        .restore(
            &name,
            0,
            SharedState {
                state: State::Closed,
                ..future
            },
        )
        .await;
    expect_eq!(
        cx,
        (v.state, v.opened_at),
        (State::Closed, crate::clock::Timestamp::ZERO),
        "restore of CLOSED with an opened_at"
    );
}

pub(in crate::store::contract) async fn versions_never_pass_the_maximum<T: Subject>(
    s: &T,
    t: &dyn StorageTime,
) {
    let cx = Cx::new(s, t, "R16.7 versions_never_pass_the_maximum");
    let name = cx.name();
    let top = SharedState {
        state: State::HalfOpen,
        version: SharedState::MAX_VERSION - 1,
        probes_permitted: 1,
        probes_remaining: 1,
        ..SharedState::closed()
    };
    let v = cx.restore(&name, 0, top).await;
    expect_eq!(
        cx,
        v.version,
        SharedState::MAX_VERSION,
        "restore at MAX_VERSION - 1: lifted to MAX_VERSION"
    );
    let lease = cx.lease(&name).await;
    let recorded = cx.record(&name, Outcome::Success).await;
    let restored = cx.restore(&name, SharedState::MAX_VERSION, top).await;
    for (what, version) in [
        ("a lease", lease.state.version),
        ("a record", recorded.version),
        ("a restore", restored.version),
    ] {
        if version > SharedState::MAX_VERSION {
            violated!(
                cx,
                "{what} at MAX_VERSION wrote version {version}, above SharedState::MAX_VERSION"
            );
        }
    }
}
