"""The league protocol shared by the League Manager, referees and players.

An agent is "a set of tools + a server": build a :class:`~leagueproto.tools.Toolset`,
wrap it in :class:`~leagueproto.server.McpServer`, and serve it with
:func:`~leagueproto.asgi.make_asgi_app`. Outgoing calls go through
:class:`~leagueproto.client.AgentClient`. Nothing here imports Django.
"""

from leagueproto.envelope import PROTOCOL_VERSION, make_message, utc_now
from leagueproto.errors import ErrorCode, LeagueError

__all__ = ["PROTOCOL_VERSION", "ErrorCode", "LeagueError", "make_message", "utc_now"]
