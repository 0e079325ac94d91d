"""Websocket routes of the live dashboard."""

from django.urls import re_path

from league.consumers import LeagueConsumer, LeagueListConsumer

websocket_urlpatterns = [
    re_path(r"^ws/leagues/$", LeagueListConsumer.as_asgi()),
    re_path(r"^ws/leagues/(?P<league_id>[^/]+)/$", LeagueConsumer.as_asgi()),
]
