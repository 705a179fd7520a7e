"""The three traces of issue 20 item 6, run on the released interlock-cb 2.8.2.

    /work/ref-venv/bin/python crates/interlock/tests/traces_2_8_2.py

(any environment with `pip install interlock-cb==2.8.2`). It prints what
2.8.2 does at each step; `tests/traces_2_8_2.rs` asserts the same of
interlock, step by step, and quotes this script's output.
"""

import dataclasses
import threading
import time

import interlock
from interlock import CircuitBreaker, Config, ProbeLease, SharedState, State


class Clock:
    def __init__(self):
        self.t = 0.0

    def monotonic(self):
        return self.t


class Unreachable(Exception):
    pass


class Down(Exception):
    pass


def raise_down():
    raise Down()


def trips_on_one_failure(**settings):
    clock = Clock()
    config = Config(window_size=1, minimum_number_of_calls=1, wait_duration_in_open=1.0, **settings)
    breaker = CircuitBreaker(
        name="svc", config=config, clock=clock, unreachable_exceptions=(Unreachable,)
    )
    return breaker, clock


def fail(breaker):
    try:
        breaker.call(raise_down)
    except Down:
        pass


# The context-manager surface, split in two so that probes overlap.
def acquire(breaker):
    return breaker._engine.enter_block()


def settle(breaker, entry, exception=None):
    start, admission = entry
    breaker._engine.exit_block(start=start, admission=admission, exception=exception)


def r9_4():
    b, clock = trips_on_one_failure(permitted_calls_in_half_open=2, max_concurrent_probes=2)
    fail(b)
    clock.t += 1.0
    a = acquire(b)
    bb = acquire(b)
    settle(b, a, Unreachable())
    c = acquire(b)
    settle(b, bb, Unreachable())
    print("R9.4 after b, the second inconclusive probe, with c in flight:", b.state.value)
    settle(b, c)
    print("R9.4 after c succeeds:", b.state.value)
    b.call(lambda: None)
    print("R9.4 after one more call:", b.state.value)


def r9_5():
    b, clock = trips_on_one_failure(
        permitted_calls_in_half_open=1, wait_duration_backoff_multiplier=2.0
    )
    fail(b)
    print("R9.5 retry_after after the trip:", b._engine._machine.retry_after())
    clock.t += 1.0
    settle(b, acquire(b), Unreachable())
    print("R9.5 after one inconclusive probe:", b.state.value, b._engine._machine.retry_after())


class RecordingStorage:
    """An in-memory storage that logs each write with the state it found."""

    poll_interval = 0.01

    def __init__(self):
        self.lock = threading.Lock()
        self.log = []
        self.s = SharedState(
            state=State.HALF_OPEN, opened_at=0.0, version=1, probes_permitted=3,
            probes_remaining=3, probes_completed=0, probe_failures=0, probe_slows=0,
        )

    def _next(self, **changes):
        self.s = dataclasses.replace(self.s, version=self.s.version + 1, **changes)
        return self.s

    def read(self, name):
        with self.lock:
            return self.s

    def begin_half_open_if_elapsed(self, *, name, wait_duration, permitted, ttl):
        with self.lock:
            return self.s

    def lease_probe(self, *, name, ttl):
        with self.lock:
            self.log.append(f"lease_probe in {self.s.state.value}")
            granted = self.s.state is State.HALF_OPEN and self.s.probes_remaining > 0
            if not granted:
                return ProbeLease(granted=False, state=self.s)
            return ProbeLease(granted=True, state=self._next(probes_remaining=self.s.probes_remaining - 1))

    def record_probe(self, *, name, outcome, ttl):
        with self.lock:
            tallied = self.s.state is State.HALF_OPEN
            self.log.append(f"record_probe {outcome.value} in {self.s.state.value}: " + ("tallied" if tallied else "dropped"))
            if not tallied:
                return self.s
            return self._next(
                probes_completed=self.s.probes_completed + 1,
                probe_failures=self.s.probe_failures + outcome.is_failure,
            )

    def trip_open(self, *, name, ttl, expected_version=None):
        with self.lock:
            self.log.append(f"trip_open in {self.s.state.value}")
            return self._next(state=State.OPEN, probes_remaining=0, probes_completed=0, probe_failures=0)

    def close(self, *, name, ttl, expected_version=None):
        with self.lock:
            self.log.append(f"close in {self.s.state.value}")
            return self._next(state=State.CLOSED)


def r15_4():
    storage = RecordingStorage()
    config = Config(
        window_size=1, minimum_number_of_calls=1, permitted_calls_in_half_open=3, max_concurrent_probes=3
    )
    b = CircuitBreaker(name="svc", config=config, storage=storage)
    b._engine._sync_coordinator.ensure_lane()
    deadline = time.monotonic() + 10
    while b._engine._shared_view is None and time.monotonic() < deadline:
        time.sleep(0.01)
    print("R15.4 shared", b._engine._shared_view.state.value, "local", b._engine._machine.state.value)
    fail(b)  # a leased probe that fails, and trips the local CLOSED machine
    b._engine._sync_coordinator.wait_idle()
    print("R15.4 local after the leased probe:", b._engine._machine.state.value)
    for line in storage.log:
        print("R15.4 storage:", line)
    b.close()


print("interlock-cb", interlock.__version__)
r9_4()
r9_5()
r15_4()
