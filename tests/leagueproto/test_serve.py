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


def test_the_connections_it_accepts_send_small_writes_at_once():
    """asyncio turns Nagle's algorithm off on the TCP connections it serves only when their socket
    says it is TCP; the listening sockets do, so an answer (headers, then body) on a kept-alive
    connection does not wait for the caller's delayed ACK (a ThreadedServer's loop is asyncio's)."""
    import asyncio
    import socket

    from leagueproto.serve import bind_sockets

    (listener,) = bind_sockets("127.0.0.1", [0])
    with listener, socket.create_connection(listener.getsockname()):
        accepted, _ = listener.accept()

        async def serve() -> int:
            transport, _ = await asyncio.get_running_loop().connect_accepted_socket(asyncio.Protocol, sock=accepted)
            try:
                return accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            finally:
                transport.close()

        assert asyncio.run(serve()) != 0
