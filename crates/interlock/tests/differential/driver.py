"""Runs scenarios on the released interlock-cb 2.8.2 for `tests/differential`.

Reads one scenario per line on stdin (JSON, written by `main.rs`) and
writes, for each step of each scenario, one line of what the breaker then
showed and, after a `|`, the events its listener heard during the step; a
line `end` closes each scenario. The test runs the same steps on
interlock and compares the lines.

Time is in ticks of 1/64 s, a binary fraction, so that every instant and
duration here is exact in a float and both sides compare the same numbers.
"""

import json
import sys

from interlock import CircuitBreaker, CircuitOpenError, Config, State
from interlock.window import WindowType

TICK = 1 / 64


class Clock:
    def __init__(self):
        self.t = 0.0

    def monotonic(self):
        return self.t


class Down(Exception):
    """A failed call (the classifier's default: every exception fails)."""


class Unreachable(Exception):
    """A call that never reached the dependency (inconclusive)."""


def error_for(verdict, text):
    if verdict == "s":
        return None
    return (Down if verdict == "f" else Unreachable)(text)


def micros(seconds):
    return "-" if seconds is None else str(round(seconds * 1_000_000))


class Listener:
    """Collects the breaker's events of a step, in order."""

    def __init__(self):
        self.events = []

    def on_state_change(self, *, name, old, new):
        self.events.append(f"state:{old.value}>{new.value}")

    def on_call(self, *, name, outcome, duration):
        self.events.append(f"call:{outcome.value}:{micros(duration)}")

    def on_rejected(self, *, name):
        self.events.append("rejected")

    def on_reset(self, *, name):
        self.events.append("reset")

    def take(self):
        taken, self.events = self.events, []
        return ",".join(taken)


def build(scenario, clock, listener):
    c = scenario["config"]
    config = Config(
        window_type=WindowType.TIME_BASED if c["time"] else WindowType.COUNT_BASED,
        window_size=c["size"],
        minimum_number_of_calls=c["minimum"],
        failure_rate_threshold=c["failure_rate"],
        slow_call_rate_threshold=c["slow_rate"],
        slow_call_duration_threshold=c["slow_ticks"] * TICK,
        wait_duration_in_open=c["wait_ticks"] * TICK,
        wait_duration_backoff_multiplier=c["multiplier"],
        wait_duration_in_open_max=None if c["wait_max_ticks"] is None else c["wait_max_ticks"] * TICK,
        permitted_calls_in_half_open=c["permitted"],
        max_concurrent_probes=c["concurrent"],
    )
    return CircuitBreaker(
        name="diff",
        config=config,
        clock=clock,
        initial_state=State[scenario["initial"].upper()],
        unreachable_exceptions=(Unreachable,),
        listener=listener,
    )


def admit(breaker):
    """The block's entry and what the admission showed."""
    try:
        return breaker._engine.enter_block(), "admitted"
    except CircuitOpenError as open_error:
        carried = open_error.last_failure
        carried = "-" if carried is None else str(carried).replace(" ", "_")
        return None, f"rejected:{micros(open_error.retry_after)}:{carried}"


def settle(breaker, entry, verdict, text):
    start, admission = entry
    breaker._engine.exit_block(start=start, admission=admission, exception=error_for(verdict, text))


def shown(breaker, admission, listener):
    s = breaker.snapshot()
    last = breaker._engine._last_failure
    return " ".join(
        [
            admission,
            breaker.state.value,
            str(breaker._engine._machine.generation),
            str(s.total_calls),
            str(s.failed_calls),
            str(s.slow_calls),
            micros(breaker._engine._machine.retry_after()),
            "-" if last is None else json.dumps(str(last)),
            "|",
            listener.take(),
        ]
    )


def run(scenario, out):
    clock = Clock()
    clock.t = scenario["start"] * TICK
    listener = Listener()
    breaker = build(scenario, clock, listener)
    held = []
    for op in scenario["ops"]:
        kind = op[0]
        admission = "-"
        if kind == "call":
            _, verdict, took, text = op
            entry, admission = admit(breaker)
            if entry is not None:
                clock.t += took * TICK
                settle(breaker, entry, verdict, text)
        elif kind == "acquire":
            entry, admission = admit(breaker)
            if entry is not None:
                held.append(entry)
        elif kind == "settle":
            # A step on a held block when none is held does nothing.
            _, slot, verdict, text = op
            if held:
                settle(breaker, held.pop(slot % len(held)), verdict, text)
        elif kind == "drop":
            # A cancelled block: a BaseException hands its slot back.
            if held:
                start, entry_admission = held.pop(op[1] % len(held))
                breaker._engine.exit_block(
                    start=start, admission=entry_admission, exception=KeyboardInterrupt()
                )
        elif kind == "advance":
            clock.t += op[1] * TICK
        elif kind == "force_open":
            breaker.force_open()
        elif kind == "disable":
            breaker.disable()
        elif kind == "metrics_only":
            breaker.metrics_only()
        elif kind == "reset":
            breaker.reset()
        else:
            raise ValueError(f"unknown step {op!r}")
        out.write(shown(breaker, admission, listener) + "\n")
    out.write("end\n")


def main():
    out = sys.stdout
    for line in sys.stdin:
        if line.strip():
            run(json.loads(line), out)
    out.flush()


main()
