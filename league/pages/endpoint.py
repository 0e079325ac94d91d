"""The league page (``/leagues/<id>/``, ``/arenas/<id>/``) as an ASGI application beside Django's
views (leaguesite/asgi.py routes it), for the one request a class makes all together: a new
viewer's first page.

The page is kept per league version and shared (``views.kept_league_page``), so what a viewer
costs is the request itself. Through Django's request cycle that is a thread of its own per
request and a hand-off to it for each sync middleware hook (~5 ms of the LM's CPU a page, against
~1 ms here: docs/benchmarks.md, "bench pages"), which 500 viewers arriving within two seconds
cannot have on two cores beside their league. Here the page is read on the pages' own threads
(``page_read``) and sent with the headers Django's security, clickjacking and
Content-Security-Policy middleware add (league/sitechecks.py); the Host is judged by Django. The
page reads no session, user or CSRF token (it is the same bytes for everyone), so the other
middleware have nothing to add to it. Anything else (another method, a league that does not
exist, a failed read) goes to Django's view, which answers it.
"""

from __future__ import annotations

import logging
from typing import Any

from django.http import Http404
from django.urls import URLPattern, path

from league.mcp.database import page_read
from league.mcp.endpoint import MCP_PATH
from league.pages.urls import ARENA_PAGE, LEAGUE_PAGE
from league.pages.views import kept_league_page
from league.sitechecks import django_request, head_of, host_answer, send_response

HTML = "text/html; charset=utf-8"
log = logging.getLogger(__name__)


class LeaguePage:
    """``GET``/``HEAD`` of a league's page; ``django`` (Django's ASGI application) answers the rest."""

    def __init__(self, django: Any) -> None:
        self.django = django

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("method") not in ("GET", "HEAD"):
            await self.django(scope, receive, send)
            return
        head = head_of(scope)
        if refused := host_answer(head):
            await send_response(send, head, *refused)
            return
        request = django_request(head)
        league_id = scope["url_route"]["kwargs"]["league_id"]
        try:
            page = await page_read(kept_league_page, request, league_id, request.build_absolute_uri(MCP_PATH))
        except Exception as exc:
            # What this cannot serve, Django's view answers: its 404 page for a league that does
            # not exist; after a failed read (a database restarting: the reading thread's
            # connection is closed with it) a second try, else Django's own 500 page and log.
            if not isinstance(exc, Http404):
                log.warning("the page of %s failed (%s); Django's view answers it", league_id, exc)
            await self.django(scope, receive, send)
            return
        await send_response(send, head, 200, page, [("Content-Type", HTML)])


def page_urlpatterns(django: Any) -> list[URLPattern]:
    """The league page's addresses (those of Django's view, league/pages/urls.py), routed here."""
    page = LeaguePage(django)
    return [path(LEAGUE_PAGE, page), path(ARENA_PAGE, page)]
