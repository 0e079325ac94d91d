"""The LM's /mcp endpoint (placeholder until the LM toolset lands: every method is unknown)."""

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from leagueproto.server import McpServer
from leagueproto.tools import Toolset

_server = McpServer(Toolset(name="league-manager", sender="league_manager"))


@csrf_exempt
async def mcp_view(request: HttpRequest) -> HttpResponse:
    headers = {k.lower(): v for k, v in request.headers.items()}
    reply = await _server.handle_http(request.method or "", request.body, headers)
    response = HttpResponse(reply.body, status=reply.status)
    for name, value in reply.headers:
        response[name] = value
    return response
