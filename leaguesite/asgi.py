"""ASGI entry point: Django for HTTP but the agents' endpoints (``/mcp``: league/mcp/endpoint.py; the
relay's: league/relay/endpoint.py) and a league's page (league/pages/endpoint.py), Channels for
the dashboard's websockets and the relay's."""

import asyncio
import contextvars
import os
from importlib import import_module

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaguesite.settings.production")
django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402

# The URLconf, and what it imports (DRF, drf-spectacular: ~1 s of CPU), is imported as the process
# starts: Django would import it on the first request, which would wait that long for its answer
# (the first agent to register after a restart, in the middle of a class's burst).
import_module(settings.ROOT_URLCONF)

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import re_path  # noqa: E402

from league.mcp.endpoint import mcp_urlpatterns  # noqa: E402
from league.pages.endpoint import page_urlpatterns  # noqa: E402
from league.relay.routing import agent_sockets, http_urlpatterns  # noqa: E402
from league.routing import websocket_urlpatterns  # noqa: E402
from leaguesite.limits import RequestLimits  # noqa: E402
from leaguesite.static import static_files, static_prefix  # noqa: E402

dashboard_sockets = AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))


async def websockets(scope, receive, send) -> None:
    app = agent_sockets if scope["path"].startswith("/agents/") else dashboard_sockets
    await app(scope, receive, send)


# The agents' calls (/mcp, and a relayed call to /relay/…) are served by ASGI applications of their
# own, not Django views: a 100-player league makes ~10,000 calls to /mcp and, relayed, ~59,500 to
# the relay, and as a Django view each cost the LM ~4.8 ms of CPU (a thread per request, a hand-off
# to it for each sync middleware hook and signal, a new database connection) against about 1 ms for
# these endpoints (docs/benchmarks.md, "Why the code is shaped this way"). A league's page, the
# one request a whole class makes together, is served beside Django too (its kept bytes; anything
# else about it is Django's view's). They have Django judge the Host and add its security
# middleware's headers (league/sitechecks.py).
routes = URLRouter(
    [*mcp_urlpatterns, *http_urlpatterns, *page_urlpatterns(django_asgi_app), re_path(r"", django_asgi_app)]
)
static = static_files()  # WhiteNoise (leaguesite/static.py)
STATIC_PREFIX = static_prefix()


# Set in the context of a request for a static file. WhiteNoise's answer is sent from its thread
# through asgiref's ``async_to_sync``, and the server starts a request pipelined on the same
# keep-alive connection from inside that answer's last ``send``: that request inherits the context,
# with asgiref's executor in it, gone by the time it runs (every such request was a 500:
# "CurrentThreadExecutor already quit or is broken", django/asgiref#491; tests/leaguesite/test_static.py).
_after_static: contextvars.ContextVar[bool] = contextvars.ContextVar("after_static", default=False)


async def http(scope, receive, send) -> None:
    if scope["path"].startswith(STATIC_PREFIX):
        _after_static.set(True)
        await static(scope, receive, send)
    else:
        await routes(scope, receive, send)


limited_http = RequestLimits(http)


async def http_in_a_context_of_its_own(scope, receive, send) -> None:
    """A request started from inside a static file's answer runs in a fresh context (see
    ``_after_static``); every other one as the server started it (a task of its own already: one
    more per agent call cost the LM ~2 % of its CPU in a relayed league)."""
    if _after_static.get():
        await asyncio.create_task(limited_http(scope, receive, send), context=contextvars.Context())
    else:
        await limited_http(scope, receive, send)


application = ProtocolTypeRouter(
    {
        # Body size and read deadline first (leaguesite/limits.py), then static files, the relay or Django.
        "http": http_in_a_context_of_its_own,
        "websocket": websockets,
    }
)
