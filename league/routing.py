"""Websocket routes of the live dashboard."""

websocket_urlpatterns: list = []
