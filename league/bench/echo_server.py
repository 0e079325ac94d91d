"""The ceiling's server: the agents' own stack (uvicorn + leagueproto ASGI + McpServer) with only
the built-in ``ping``, so it measures what HTTP + JSON-RPC cost on this machine, nothing else.

Run: ``python -m league.bench.echo_server PORT``.
"""

from __future__ import annotations

import asyncio
import sys

from leagueproto.asgi import make_asgi_app
from leagueproto.serve import bind_sockets, make_server
from leagueproto.server import McpServer
from leagueproto.tools import Toolset


def main(port: int) -> None:
    app = make_asgi_app(McpServer(Toolset(name="echo", sender="league_manager")))
    server = make_server(app, lifespan="off")
    sockets = bind_sockets("127.0.0.1", [port])
    import uvloop

    uvloop.run(server.serve(sockets=sockets)) if hasattr(uvloop, "run") else asyncio.run(server.serve(sockets))


if __name__ == "__main__":
    main(int(sys.argv[1]))
