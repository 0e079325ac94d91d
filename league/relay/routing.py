"""The relay's WebSocket route (leaguesite/asgi.py mounts it beside the dashboard's)."""

from django.urls import re_path

from league.relay.consumer import RelayConsumer

websocket_urlpatterns = [re_path(r"^agents/connect/?$", RelayConsumer.as_asgi())]
