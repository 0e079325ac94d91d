"""Long-running agent processes tune their garbage collector once started (leagueproto.serve.tune_gc):
the agents' commands and the conductor."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from leagueproto.serve import GC_THRESHOLDS, tune_gc


@pytest.fixture
def restore_gc() -> Iterator[None]:
    before = gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_tuning_freezes_start_up_objects_and_spaces_out_collections(restore_gc):
    tune_gc()
    assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.get_freeze_count() > 0


def test_a_stopped_threaded_server_has_closed_its_event_loop():
    """Its selector and wake-up sockets go at once: a test run starts hundreds of these servers, and
    a tuned collector (frozen objects, rare collections) would hold them for the rest of the run."""
    from leagueproto.serve import ThreadedServer

    async def app(scope, receive, send) -> None:  # noqa: ANN001 (any ASGI app; never called)
        raise AssertionError("no request is made")

    server = ThreadedServer(app, lifespan="off").start()
    server.stop()
    assert server.loop is not None and server.loop.is_closed()
