"""The suite's one way to wait for something to happen: poll a condition until it holds.

Tests wait on the event they expect (a row, a log line, a reply), never for a fixed time, and
never sleep and then assert that something did not happen: they wait for the event that would
have happened instead, then check.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until[T](
    condition: Callable[[], T], timeout: float = 10.0, what: str = "condition", interval: float = 0.02
) -> T:
    """Poll ``condition`` until it returns something truthy and return that; AssertionError
    naming ``what`` once ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what} not reached in {timeout:g} s"
        time.sleep(interval)
