"""The League Manager as an agent: its ``/mcp`` endpoint (docs/protocol.md).

* ``endpoint.py``: ``/mcp`` itself, an ASGI application over leagueproto's McpServer.
* ``database.py``: the thread every tool's database work runs on.
* ``toolset.py``: what every call passes before its handler (rate limit, checks, outages).
* ``tools.py``: one handler per tool (authentication, the action, the Event log).
* ``reports.py``: reports that arrive together are recorded as one batch.
* ``messages.py``: the request and reply models; ``exchange.py``: the Event log of calls.
* ``resources.py``: the MCP resources.
"""

from league.mcp import resources as resources  # registers the resources (and, through it, the tools)
from league.mcp.toolset import toolset as toolset

__all__ = ["toolset"]
