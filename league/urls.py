from django.urls import include, path

from league.mcp.view import mcp_view
from league.relay.view import relay_view

urlpatterns = [
    # Exactly /mcp (and /mcp/), never a redirect: agents POST here.
    path("mcp", mcp_view, name="mcp"),
    path("mcp/", mcp_view),
    # A relay player's endpoint (league/relay/): POSTed by referees and the conductor.
    path("relay/<str:league_id>/<str:player_id>/mcp", relay_view, name="relay"),
    path("api/", include("league.api.urls")),
    path("", include("league.pages.urls")),
]
