"""One Python service instance for the mixed-fleet tests of interlock-redis.

It runs a breaker of the original library, interlock-cb 2.8.2, coordinated
through the original's ``RedisStorage``, and takes commands from the Rust
test harness: one JSON object per line on stdin, one JSON answer per line on
stdout. The harness starts it with the interpreter of a virtual environment
that has ``interlock-cb==2.8.2`` and ``redis`` installed.

Commands:

``{"cmd": "call", "ok": bool}``
    one call through the breaker; the answer's ``result`` is ``ok``,
    ``failed`` (the dependency's own error), ``rejected`` (with
    ``retry_after``) or ``unexpected`` (any other exception: a storage error
    that reached the call, which the tests treat as a bug).
``{"cmd": "state"}``
    the breaker's effective state.
``{"cmd": "health", "up": bool, "hang": bool}``
    whether the dependency of the traffic loop succeeds; with ``hang`` it
    never answers (it blocks for an hour), so a probe keeps its lease.
``{"cmd": "traffic", "on": bool}``
    starts or stops a thread calling the dependency in a loop.
``{"cmd": "stats"}``
    what the traffic loop saw: calls, rejections, unexpected errors, every
    probe lease granted to this instance as ``[opened_at_us, version,
    permitted, remaining, completed]`` (the view it returned), and the leases
    whose probe call then ran.
``{"cmd": "events"}``
    the listener's storage events and state changes so far.
``{"cmd": "op", ...}``
    one storage operation on the plain storage (for the differential tests
    of the layout): ``read``, ``trip_open``, ``begin``, ``lease``,
    ``record``, ``close``; the answer is the shared state.
``{"cmd": "quit"}``
    closes the breaker (drains its writes) and exits.
"""

import argparse
import json
import os
import sys
import threading
import time

import redis
from interlock import CircuitBreaker, CircuitOpenError, Config, Outcome, WindowType
from interlock.integrations.redis import RedisStorage


class DependencyDown(Exception):
    """What the protected call raises while the dependency is unhealthy."""


class Tally:
    """What this instance observed, shared by the traffic thread and the
    command loop."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0
        self.rejected = 0
        self.unexpected: list[str] = []
        self.leases: list[list[int]] = []
        self.probe_calls: list[list[int]] = []
        self.events: list[str] = []


TALLY = Tally()
# The lease granted on this thread and not yet spent by a call, if any.
CURRENT = threading.local()


class RecordingStorage(RedisStorage):
    """The original's storage, noting every probe lease it is granted."""

    def lease_probe(self, *, name, ttl):
        lease = super().lease_probe(name=name, ttl=ttl)
        if lease.granted:
            st = lease.state
            mark = [
                round(st.opened_at * 1_000_000),
                st.version,
                st.probes_permitted,
                st.probes_remaining,
                st.probes_completed,
            ]
            with TALLY.lock:
                TALLY.leases.append(mark)
            CURRENT.lease = mark
        return lease


class Listener:
    """Collects the events the tests look at."""

    def on_state_change(self, *, name, old, new):
        with TALLY.lock:
            TALLY.events.append(f'state {old} -> {new}')

    def on_storage_degraded(self, *, name, error):
        with TALLY.lock:
            TALLY.events.append(f'degraded: {type(error).__name__}: {error}')

    def on_storage_recovered(self, *, name):
        with TALLY.lock:
            TALLY.events.append('recovered')

    def on_storage_write_dropped(self, *, name):
        with TALLY.lock:
            TALLY.events.append('write dropped')


HANG = threading.Event()


def dependency(up: bool) -> str:
    """The protected call: notes a spent probe lease, then succeeds or fails
    (or, while ``HANG`` is set, never returns)."""
    mark = getattr(CURRENT, 'lease', None)
    if mark is not None:
        CURRENT.lease = None
        with TALLY.lock:
            TALLY.probe_calls.append(mark)
    if HANG.is_set():
        time.sleep(3600)
    if not up:
        raise DependencyDown('the dependency is down')
    return 'ok'


def call(breaker: CircuitBreaker, up: bool) -> dict:
    try:
        breaker.call(dependency, up)
    except DependencyDown:
        return {'result': 'failed'}
    except CircuitOpenError as e:
        return {'result': 'rejected', 'retry_after': e.retry_after}
    except Exception as e:  # a storage error reaching a call: a bug
        return {'result': 'unexpected', 'error': f'{type(e).__name__}: {e}'}
    return {'result': 'ok'}


class Traffic:
    """A thread calling the dependency until stopped."""

    def __init__(self, breaker: CircuitBreaker) -> None:
        self.breaker = breaker
        self.up = False
        self.running = False
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        if self.running:
            return
        self.running = True
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.running = False
        if self.thread is not None:
            self.thread.join()
            self.thread = None

    def run(self) -> None:
        while self.running:
            answer = call(self.breaker, self.up)
            with TALLY.lock:
                TALLY.calls += 1
                if answer['result'] == 'rejected':
                    TALLY.rejected += 1
                elif answer['result'] == 'unexpected':
                    TALLY.unexpected.append(answer['error'])
            time.sleep(0.002)


def shared(state) -> dict:
    return {
        'state': str(state.state),
        'opened_at_us': round(state.opened_at * 1_000_000),
        'version': state.version,
        'probes': [
            state.probes_permitted,
            state.probes_remaining,
            state.probes_completed,
            state.probe_failures,
            state.probe_slows,
        ],
    }


def operation(storage: RedisStorage, request: dict) -> dict:
    name, ttl = request['name'], request.get('ttl', 60.0)
    op = request['op']
    if op == 'read':
        state = storage.read(name)
        return {'absent': True} if state is None else shared(state)
    if op == 'trip_open':
        return shared(storage.trip_open(name=name, ttl=ttl, expected_version=request.get('expected')))
    if op == 'close':
        return shared(storage.close(name=name, ttl=ttl, expected_version=request.get('expected')))
    if op == 'begin':
        return shared(
            storage.begin_half_open_if_elapsed(
                name=name, wait_duration=request['wait'], permitted=request['permitted'], ttl=ttl
            )
        )
    if op == 'lease':
        lease = storage.lease_probe(name=name, ttl=ttl)
        return {'granted': lease.granted, **shared(lease.state)}
    if op == 'record':
        outcome = Outcome[request['outcome']]
        return shared(storage.record_probe(name=name, outcome=outcome, ttl=ttl))
    raise ValueError(f'unknown op {op!r}')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--url', required=True)
    parser.add_argument('--name', required=True)
    parser.add_argument('--prefix', default='interlock:cb:')
    parser.add_argument('--poll', type=float, default=0.05)
    parser.add_argument('--ttl', type=float, default=30.0)
    parser.add_argument('--retry-backoff', type=float, default=0.5)
    parser.add_argument('--wait', type=float, default=0.3)
    parser.add_argument('--permitted', type=int, default=3)
    parser.add_argument('--window', type=int, default=4)
    parser.add_argument('--min-calls', type=int, default=2)
    args = parser.parse_args()

    client = redis.Redis.from_url(args.url, socket_timeout=2.0, socket_connect_timeout=2.0)
    knobs = {
        'key_prefix': args.prefix,
        'state_ttl': args.ttl,
        'poll_interval': args.poll,
        'retry_backoff': args.retry_backoff,
    }
    storage = RecordingStorage(client, **knobs)
    plain = RedisStorage(client, **knobs)
    config = Config(
        window_type=WindowType.COUNT_BASED,
        window_size=args.window,
        minimum_number_of_calls=args.min_calls,
        wait_duration_in_open=args.wait,
        permitted_calls_in_half_open=args.permitted,
    )
    breaker = CircuitBreaker(name=args.name, config=config, storage=storage, listener=Listener())
    traffic = Traffic(breaker)

    def answer(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj) + '\n')
        sys.stdout.flush()

    answer({'ready': True, 'interlock_cb': __import__('interlock').VERSION})
    for line in sys.stdin:
        request = json.loads(line)
        cmd = request['cmd']
        try:
            if cmd == 'call':
                answer({**call(breaker, request['ok']), 'state': str(breaker.state)})
            elif cmd == 'state':
                answer({'state': str(breaker.state)})
            elif cmd == 'health':
                traffic.up = request['up']
                if request.get('hang'):
                    HANG.set()
                else:
                    HANG.clear()
                answer({'up': traffic.up, 'hang': HANG.is_set()})
            elif cmd == 'traffic':
                if request['on']:
                    traffic.start()
                else:
                    traffic.stop()
                answer({'running': traffic.running})
            elif cmd == 'stats':
                with TALLY.lock:
                    answer(
                        {
                            'calls': TALLY.calls,
                            'rejected': TALLY.rejected,
                            'unexpected': list(TALLY.unexpected),
                            'leases': list(TALLY.leases),
                            'probe_calls': list(TALLY.probe_calls),
                        }
                    )
            elif cmd == 'events':
                with TALLY.lock:
                    answer({'events': list(TALLY.events)})
            elif cmd == 'op':
                answer(operation(plain, request))
            elif cmd == 'quit':
                if HANG.is_set():
                    os._exit(0)  # a hung call cannot be waited for
                traffic.stop()
                breaker.close()
                answer({'bye': True})
                return
            else:
                answer({'error': f'unknown command {cmd!r}'})
        except Exception as e:  # reported to the harness, which fails the test
            answer({'error': f'{type(e).__name__}: {e}'})


if __name__ == '__main__':
    main()
