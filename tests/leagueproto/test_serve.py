"""leagueproto.serve: the agents' uvicorn servers, in the foreground or on a thread."""

from __future__ import annotations


def test_a_stopped_threaded_server_has_closed_its_event_loop():
    """Its selector and wake-up sockets go at once, not whenever a collection finds them: a test
    run starts hundreds of these servers."""
    from leagueproto.serve import ThreadedServer

    async def app(scope, receive, send) -> None:  # noqa: ANN001 (any ASGI app; never called)
        raise AssertionError("no request is made")

    server = ThreadedServer(app, lifespan="off").start()
    server.stop()
    assert server.loop is not None and server.loop.is_closed()
