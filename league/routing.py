"""Websocket routes of the live dashboard."""

from django.urls import re_path

from league.consumers import LeagueConsumer

websocket_urlpatterns = [
    re_path(r"^ws/leagues/(?P<league_id>[-\w]+)/$", LeagueConsumer.as_asgi()),
]
