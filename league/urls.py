from django.urls import include, path

# /mcp is not a Django view: league/mcp/endpoint.py (leaguesite/asgi.py routes it).
urlpatterns = [
    path("api/", include("league.api.urls")),
    path("", include("league.pages.urls")),
]
