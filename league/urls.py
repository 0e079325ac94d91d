from django.urls import include, path

from league.mcp.view import mcp_view

urlpatterns = [
    # Exactly /mcp (and /mcp/), never a redirect: agents POST here.
    path("mcp", mcp_view, name="mcp"),
    path("mcp/", mcp_view),
    path("api/", include("league.api.urls")),
    path("", include("league.pages.urls")),
]
