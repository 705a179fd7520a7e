"""The Python half of the interlock_cb_fleet example: one instance of the
service on the original library, interlock-cb 2.8, sharing the breaker
``payments`` with the Rust instance (``interlock_cb_fleet.rs``).

It calls a healthy dependency every 100 ms and prints what happens. When
the Rust instance trips the breaker, its calls are rejected without a
failure of its own; when a shared probe round passes, they run again. It
exits once it has seen that, or after a minute.

    REDIS_URL=redis://127.0.0.1:6379/ python interlock_cb_fleet.py
"""

import os
import time

import redis
from interlock import CircuitBreaker, CircuitOpenError, Config, State, WindowType
from interlock.integrations.redis import RedisStorage


def main() -> int:
    url = os.environ.get('REDIS_URL', 'redis://127.0.0.1:6379/')
    name = os.environ.get('BREAKER', 'payments')
    client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    # The same settings as the Rust instance.
    storage = RedisStorage(client, poll_interval=0.1)
    config = Config(
        window_type=WindowType.COUNT_BASED,
        window_size=2,
        minimum_number_of_calls=2,
        wait_duration_in_open=2.0,
        permitted_calls_in_half_open=2,
    )
    breaker = CircuitBreaker(name=name, config=config, storage=storage)
    print(f'python: key interlock:cb:{name}', flush=True)
    deadline = time.monotonic() + 60.0
    last, seen_open = None, False
    try:
        while time.monotonic() < deadline:
            try:
                breaker.call(lambda: 'ok')
                outcome = 'ok'
            except CircuitOpenError:
                outcome = 'rejected'
            state = breaker.state
            seen_open = seen_open or state is not State.CLOSED
            line = f'python: call {outcome}, breaker {state}'
            if line != last:
                print(line, flush=True)
                last = line
            if seen_open and state is State.CLOSED:
                print('python: the fleet recovered', flush=True)
                return 0
            time.sleep(0.1)
    finally:
        breaker.close()
    print('python: the breaker did not open and close again within a minute', flush=True)
    return 1


if __name__ == '__main__':
    raise SystemExit(main())
